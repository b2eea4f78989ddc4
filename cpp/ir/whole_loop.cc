// Whole-loop fusion layout (see whole_loop.h).
#include "ir/whole_loop.h"

#include <algorithm>
#include <optional>

#include "ir/computation.h"
#include "support/error.h"

namespace fj {

WholeLoopLayout GetWholeLoopLayout(const InstructionAttrs& attrs, const Computation& step) {
  if (attrs.dimensions.size() != 5) {
    ThrowInvalidArgument(
        "whole-loop fusion: dimensions must be {lane carries, uniform carries, lane outputs, reductions, lanes per block}");
  }
  WholeLoopLayout l;
  l.carries = static_cast<int>(attrs.dimensions[0]);
  l.uniform_carries = static_cast<int>(attrs.dimensions[1]);
  l.lane_outputs = static_cast<int>(attrs.dimensions[2]);
  l.reductions = static_cast<int>(attrs.dimensions[3]);
  l.block_lanes = attrs.dimensions[4];
  l.trip_count = attrs.trip_count;
  l.start = attrs.index;
  l.invariants = step.num_parameters() - l.carries - l.uniform_carries - 1;
  const Instruction* root = step.root();
  int states = l.carries + l.uniform_carries;
  const bool until_done = l.trip_count == -1;
  int expected = states + 2 * (l.lane_outputs + l.reductions) + (until_done ? 1 : 0);
  if (l.carries < 0 || l.uniform_carries < 0 || l.lane_outputs < 0 || l.reductions < 0 || l.block_lanes < 1 ||
      l.trip_count < -1 || l.invariants < 0 ||
      (until_done && (l.carries < 1 || l.lane_outputs + l.reductions > 0)) ||
      !root || root->opcode() != Opcode::kTuple || root->operand_count() != expected) {
    ThrowInvalidArgument("whole-loop fusion: the step computation does not match its layout");
  }
  if (until_done) {
    l.predicate = expected - 1;
    // The lanes' predicate (of their shape), or one predicate for all lanes (a scalar: the
    // uniform carries and invariants decide; or there is one lane). Only with one predicate
    // for all may there be uniform carries: every block of lanes then steps alike.
    const Shape& p = root->operand(l.predicate)->shape();
    bool per_lane = p.IsArray() && p.dims() == root->operand(0)->shape().dims();
    bool uniform = p.IsArray() && (p.rank() == 0 || root->operand(0)->shape().NumElements() == 1);
    if (!p.IsArray() || p.dtype() != DType::kPred || !(per_lane || uniform) || (l.uniform_carries > 0 && !uniform)) {
      ThrowInvalidArgument("whole-loop fusion: a loop until its lanes are done needs a predicate of the lanes' shape, "
                           "or a scalar one");
    }
  }
  // The lanes: the carries' shape, or the first per-lane output's, or the reductions'.
  const Instruction* first = l.carries > 0 ? root->operand(0)
                            : l.lane_outputs > 0 ? root->operand(states)
                            : l.reductions > 0 ? root->operand(states + 2 * l.lane_outputs)->operand(0)
                                               : nullptr;
  if (first) l.lanes = first->shape().dims();
  int64_t n = 1;
  for (int64_t d : l.lanes) n *= d;
  l.blocks = std::max<int64_t>(1, (n + l.block_lanes - 1) / l.block_lanes);
  return l;
}

Shape WholeLoopShape(const InstructionAttrs& attrs, const Computation& step) {
  WholeLoopLayout l = GetWholeLoopLayout(attrs, step);
  const Instruction* root = step.root();
  int states = l.carries + l.uniform_carries;
  std::vector<Shape> out;
  for (int k = 0; k < states; ++k) out.push_back(root->operand(k)->shape());
  for (int k = 0; k < l.lane_outputs; ++k) {
    const Shape& s = root->operand(states + 2 * k)->shape();
    std::vector<int64_t> dims = {l.trip_count};
    dims.insert(dims.end(), s.dims().begin(), s.dims().end());
    out.push_back(Shape(s.dtype(), dims));
  }
  for (int k = 0; k < l.reductions; ++k) {
    const Shape& s = root->operand(states + 2 * l.lane_outputs + 2 * k)->shape();
    out.push_back(Shape(s.dtype(), {l.blocks, l.trip_count}));
  }
  return Shape::Tuple(out);
}

std::vector<int64_t> NonUnitDims(const Shape& s) {
  std::vector<int64_t> d;
  for (int k = 0; k < s.rank(); ++k) if (s.dim(k) != 1) d.push_back(k);
  return d;
}

std::optional<std::vector<int64_t>> LaneDimsOf(const Instruction* i, const LaneDims& known) {
  const std::vector<int64_t>* in = nullptr;  // the lane dims of the lane operands (all equal)
  int lane_operand = -1;
  for (int k = 0; k < i->operand_count(); ++k) {
    auto it = known.find(i->operand(k));
    if (it == known.end()) continue;
    if (in && *in != it->second) return std::nullopt;
    in = &it->second;
    if (lane_operand < 0) lane_operand = k;
  }
  if (!in) return std::nullopt;
  const std::vector<int64_t>& lanes = *in;
  auto contains = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  const Instruction* x = i->operand(lane_operand);
  switch (i->opcode()) {
    case Opcode::kReshape:
    case Opcode::kCopy:
      // Only unit dimensions come or go: the lanes keep their order.
      if (NonUnitDims(i->shape()).size() != lanes.size()) return std::nullopt;
      for (size_t k = 0; k < lanes.size(); ++k) {
        if (i->shape().dim(static_cast<int>(NonUnitDims(i->shape())[k])) != x->shape().dim(static_cast<int>(lanes[k]))) return std::nullopt;
      }
      if (NonUnitDims(x->shape()) != lanes) return std::nullopt;
      return NonUnitDims(i->shape());
    case Opcode::kBroadcast: {
      std::vector<int64_t> out;
      for (int64_t d : lanes) out.push_back(i->dimensions()[d]);
      return out;
    }
    case Opcode::kConcatenate:
      if (contains(lanes, i->dimensions()[0])) return std::nullopt;
      return lanes;
    case Opcode::kSlice: {
      const SliceConfig& s = i->attrs().slice;
      for (int64_t d : lanes) {
        if (s.starts[d] != 0 || s.limits[d] != x->shape().dim(static_cast<int>(d)) || s.strides[d] != 1) return std::nullopt;
      }
      return lanes;
    }
    case Opcode::kReduce:
    case Opcode::kArgMax:
    case Opcode::kArgMin: {
      if (i->opcode() == Opcode::kReduce && (lane_operand != 0 || i->operand_count() != 2)) return std::nullopt;
      std::vector<int64_t> out;
      for (int64_t d : lanes) {
        if (contains(i->dimensions(), d)) return std::nullopt;
        int64_t before = 0;
        for (int64_t r : i->dimensions()) before += r < d;
        out.push_back(d - before);
      }
      return out;
    }
    case Opcode::kDot: {
      // One operand's lanes among its free dimensions; the other operand the same for all.
      if (known.count(i->operand(1 - lane_operand))) return std::nullopt;
      const DotDims& dd = i->attrs().dot;
      const std::vector<int64_t>& batch = lane_operand == 0 ? dd.lhs_batch : dd.rhs_batch;
      const std::vector<int64_t>& contracting = lane_operand == 0 ? dd.lhs_contracting : dd.rhs_contracting;
      // Output dimensions: batch, the lhs's free ones, the rhs's free ones.
      int64_t at = static_cast<int64_t>(dd.lhs_batch.size());
      if (lane_operand == 1) at += i->operand(0)->shape().rank() - static_cast<int64_t>(dd.lhs_batch.size() + dd.lhs_contracting.size());
      std::vector<int64_t> out;
      for (int d = 0; d < x->shape().rank(); ++d) {
        if (contains(batch, d) || contains(contracting, d)) {
          if (contains(lanes, d)) return std::nullopt;
          continue;
        }
        if (contains(lanes, d)) out.push_back(at);
        ++at;
      }
      return out;
    }
    default:
      if (!IsElementwise(i->opcode())) return std::nullopt;
      for (const Instruction* op : i->operands()) {
        // Operands of the result's shape, or a scalar the same for all lanes (clamp's bounds).
        bool same_for_all = op->shape().IsScalar() && !known.count(op);
        if (!op->shape().SameDims(i->shape()) && !same_for_all) return std::nullopt;
      }
      return lanes;
  }
}

LaneDims StepLaneDims(const InstructionAttrs& attrs, const Computation& step) {
  WholeLoopLayout l = GetWholeLoopLayout(attrs, step);
  LaneDims dims;
  for (const Instruction* i : step.MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter) {
      if (i->parameter_number() < l.carries) dims[i] = NonUnitDims(i->shape());
      continue;
    }
    if (i == step.root() || !i->shape().IsArray()) continue;
    if (std::optional<std::vector<int64_t>> d = LaneDimsOf(i, dims)) dims[i] = *d;
  }
  return dims;
}

}  // namespace fj
