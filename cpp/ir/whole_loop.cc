// Whole-loop fusion layout (see whole_loop.h).
#include "ir/whole_loop.h"

#include <algorithm>

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
  int expected = states + 2 * (l.lane_outputs + l.reductions);
  if (l.carries < 0 || l.uniform_carries < 0 || l.lane_outputs < 0 || l.reductions < 0 || l.block_lanes < 1 ||
      l.trip_count < 0 || l.invariants < 0 ||
      !root || root->opcode() != Opcode::kTuple || root->operand_count() != expected) {
    ThrowInvalidArgument("whole-loop fusion: the step computation does not match its layout");
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

}  // namespace fj
