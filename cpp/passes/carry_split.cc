// Loop carry splitting and slice sinking (see carry_split.h).
#include "passes/carry_split.h"

#include <algorithm>
#include <map>

#include "ir/builder.h"
#include "passes/loop_rewrite.h"
#include "support/error.h"

namespace fj {
namespace {

// The dimensions of `s` but `axis`.
std::vector<int64_t> Rest(const Shape& s, int axis) {
  std::vector<int64_t> dims = s.dims();
  dims.erase(dims.begin() + axis);
  return dims;
}

// A slice of exactly one row along `axis` (full in the others, stride 1).
bool IsRowSlice(const Instruction* i, int axis) {
  if (i->opcode() != Opcode::kSlice) return false;
  const SliceConfig& s = i->attrs().slice;
  const Shape& in = i->operand(0)->shape();
  if (s.limits[axis] - s.starts[axis] != 1 || s.strides[axis] != 1) return false;
  for (int d = 0; d < in.rank(); ++d) {
    if (d == axis) continue;
    if (s.starts[d] != 0 || s.limits[d] != in.dim(d) || s.strides[d] != 1) return false;
  }
  return true;
}

// Whether every read of state element k in `c` (a loop condition or body) is a row slice
// along `axis`.
bool ReadOnlyByRows(const Computation& c, int64_t k, int axis) {
  for (const Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter) {
      for (const Instruction* u : i->users()) {
        if (u->opcode() != Opcode::kGetTupleElement) return false;  // the state read whole
      }
    }
    if (i->opcode() != Opcode::kGetTupleElement || i->tuple_index() != k ||
        i->operand(0)->opcode() != Opcode::kParameter) {
      continue;
    }
    for (const Instruction* u : i->users()) {
      if (!IsRowSlice(u, axis)) return false;
    }
  }
  return true;
}

Instruction* Row(Builder& b, Instruction* x, int64_t j, int axis) {
  const Shape& s = x->shape();
  InstructionAttrs a;
  a.slice.starts.assign(s.rank(), 0);
  a.slice.limits = s.dims();
  a.slice.strides.assign(s.rank(), 1);
  a.slice.starts[axis] = j;
  a.slice.limits[axis] = j + 1;
  Instruction* slice = b.Add(Opcode::kSlice, {x}, a);
  slice->set_metadata(x->metadata());
  Instruction* row = b.Reshape(slice, Rest(s, axis));
  row->set_metadata(x->metadata());
  return row;
}

Instruction* Pack(Builder& b, const std::vector<Instruction*>& rows, int axis) {
  std::vector<Instruction*> pieces;
  for (Instruction* r : rows) {
    std::vector<int64_t> dims = r->shape().dims();
    dims.insert(dims.begin() + axis, 1);
    pieces.push_back(b.Reshape(r, dims));
  }
  InstructionAttrs a;
  a.dimensions = {axis};
  return b.Add(Opcode::kConcatenate, pieces, a);
}

// How a state element is split: into `rows` rows along `axis` (rows 0: not split).
struct Split1 {
  int64_t rows = 0;
  int axis = 0;
};

// The old state's elements from the split state `p` (split elements packed again, for the
// slices that read them to forward).
std::vector<Instruction*> Packed(Builder& b, const std::vector<Split1>& rows,
                                 const std::function<Instruction*(int64_t)>& element) {
  std::vector<Instruction*> old;
  int64_t next = 0;
  for (const Split1& r : rows) {
    if (r.rows == 0) {
      old.push_back(element(next++));
      continue;
    }
    std::vector<Instruction*> parts;
    for (int64_t j = 0; j < r.rows; ++j) parts.push_back(element(next++));
    old.push_back(Pack(b, parts, r.axis));
  }
  return old;
}

// The split state from the old state's elements.
std::vector<Instruction*> Rows(Builder& b, const std::vector<Split1>& rows,
                               const std::function<Instruction*(int64_t)>& element) {
  std::vector<Instruction*> out;
  for (size_t k = 0; k < rows.size(); ++k) {
    Instruction* v = element(static_cast<int64_t>(k));
    if (rows[k].rows == 0) {
      out.push_back(v);
    } else {
      for (int64_t j = 0; j < rows[k].rows; ++j) out.push_back(Row(b, v, j, rows[k].axis));
    }
  }
  return out;
}

bool SplitLoop(Instruction* loop) {
  const Instruction* init = loop->operand(0);
  const Computation* body = loop->while_body();
  const Instruction* root = body->root();
  if (init->opcode() != Opcode::kTuple || root->opcode() != Opcode::kTuple) return false;
  for (const Instruction* u : loop->users()) {
    if (u->opcode() != Opcode::kGetTupleElement) return false;
  }
  int n = init->operand_count();
  std::vector<Split1> rows(n);
  bool any = false;
  for (int k = 0; k < n; ++k) {
    const Shape& s = init->operand(k)->shape();
    const Instruction* r = root->operand(k);
    bool passed_on = r->opcode() == Opcode::kGetTupleElement && r->tuple_index() == k;
    if (s.rank() < 1 || passed_on) continue;
    // The leading axis ([4, N]: the paper's np.array state), else the last ([N, 4]: the
    // same state of one environment, stacked and vmapped).
    for (int axis : {0, s.rank() - 1}) {
      if (s.dim(axis) < 2 || s.dim(axis) > LoopCarrySplitPass::kMaxRows) continue;
      if (!ReadOnlyByRows(*body, k, axis) || !ReadOnlyByRows(*loop->while_condition(), k, axis)) continue;
      rows[k] = {s.dim(axis), axis};
      any = true;
      break;
    }
  }
  if (!any) return false;
  Builder b(loop->parent());
  Instruction* state = b.Tuple(Rows(b, rows, [&](int64_t k) { return init->operand(static_cast<int>(k)); }));
  Unpack unpack = [&](Builder& nb, Instruction* p) {
    return Packed(nb, rows, [&](int64_t j) { return nb.GetTupleElement(p, j); });
  };
  Repack repack = [&](Builder& nb, Instruction*, Instruction* root) {
    return nb.Tuple(Rows(nb, rows, [&](int64_t k) { return root->operand(static_cast<int>(k)); }));
  };
  Instruction* split = RebuildLoop(loop, state, unpack, repack);
  // The loop's result, packed again where it is read.
  std::vector<int64_t> first(n);
  for (int k = 0, next = 0; k < n; ++k) {
    first[k] = next;
    next += rows[k].rows == 0 ? 1 : rows[k].rows;
  }
  ReplaceLoop(loop, [&](Builder& pb, int64_t k) {
    if (rows[k].rows == 0) return pb.GetTupleElement(split, first[k]);
    std::vector<Instruction*> parts;
    for (int64_t j = 0; j < rows[k].rows; ++j) parts.push_back(pb.GetTupleElement(split, first[k] + j));
    return Pack(pb, parts, rows[k].axis);
  });
  return true;
}

// The slice of `x`'s operand `op` (same shape as x) that `slice` takes of x.
Instruction* SliceLike(Builder& b, const Instruction* slice, Instruction* op) {
  return b.Add(Opcode::kSlice, {op}, slice->attrs());
}

// slice(x) rewritten into x's producer, or null.
Instruction* Sink(Instruction* slice) {
  Instruction* x = slice->operand(0);
  Computation* c = slice->parent();
  Builder b(c);
  const SliceConfig& s = slice->attrs().slice;
  bool unit_strides = std::all_of(s.strides.begin(), s.strides.end(), [](int64_t v) { return v == 1; });
  if (IsElementwise(x->opcode())) {
    std::vector<Instruction*> ops;
    for (Instruction* op : x->operands()) {
      if (!op->shape().SameDims(x->shape())) return nullptr;
      ops.push_back(SliceLike(b, slice, op));
    }
    Shape shape = slice->shape().WithDType(x->dtype());
    return b.Add(x->opcode(), ops, x->attrs(), x->called_computations(), &shape);
  }
  if (x->opcode() == Opcode::kBroadcast) {
    Instruction* y = x->operand(0);
    const std::vector<int64_t>& map = x->dimensions();
    InstructionAttrs a;
    for (size_t j = 0; j < map.size(); ++j) {
      if (y->shape().dim(static_cast<int>(j)) != x->shape().dim(map[j])) {
        // A unit dimension stretched by the broadcast: its one element serves every index.
        a.slice.starts.push_back(0);
        a.slice.limits.push_back(1);
        a.slice.strides.push_back(1);
        continue;
      }
      a.slice.starts.push_back(s.starts[map[j]]);
      a.slice.limits.push_back(s.limits[map[j]]);
      a.slice.strides.push_back(s.strides[map[j]]);
    }
    bool whole = true;
    for (size_t j = 0; j < map.size(); ++j) {
      whole = whole && a.slice.starts[j] == 0 && a.slice.limits[j] == y->shape().dim(static_cast<int>(j)) &&
              a.slice.strides[j] == 1;
    }
    Instruction* operand = whole ? y : b.Add(Opcode::kSlice, {y}, a);
    return b.Broadcast(operand, slice->shape().dims(), map);
  }
  if (x->opcode() == Opcode::kReshape) {
    // Only reshapes that insert or drop unit dimensions: the others keep their order.
    Instruction* y = x->operand(0);
    std::vector<int> xs, ys;  // the non-unit dimensions of each
    for (int d = 0; d < x->shape().rank(); ++d) if (x->shape().dim(d) != 1) xs.push_back(d);
    for (int d = 0; d < y->shape().rank(); ++d) if (y->shape().dim(d) != 1) ys.push_back(d);
    if (xs.size() != ys.size()) return nullptr;
    for (size_t j = 0; j < xs.size(); ++j) {
      if (x->shape().dim(xs[j]) != y->shape().dim(ys[j])) return nullptr;
    }
    InstructionAttrs a;
    a.slice.starts.assign(y->shape().rank(), 0);
    a.slice.limits = y->shape().dims();
    a.slice.strides.assign(y->shape().rank(), 1);
    for (int d = 0; d < x->shape().rank(); ++d) {
      if (x->shape().dim(d) != 1) continue;
      if (s.limits[d] - s.starts[d] != 1) return nullptr;  // a unit dimension sliced empty
    }
    for (size_t j = 0; j < xs.size(); ++j) {
      a.slice.starts[ys[j]] = s.starts[xs[j]];
      a.slice.limits[ys[j]] = s.limits[xs[j]];
      a.slice.strides[ys[j]] = s.strides[xs[j]];
    }
    return b.Reshape(b.Add(Opcode::kSlice, {y}, a), slice->shape().dims());
  }
  if (x->opcode() == Opcode::kDynamicSlice && unit_strides) {
    // The slice moves the dynamic slice's start by constants and shrinks its window. The
    // start is clamped first as the dynamic slice clamps it (into [0, dim - size]), so that
    // the smaller window is where the slice took it from; shifted, it needs no clamping
    // again. A window that only shrinks needs the clamp too: the smaller size would clamp
    // the start into a wider range (large-tier fuzz seed 216651: a start of 6 in a
    // dimension of 5 read column 4 instead of 3).
    std::vector<Instruction*> ops = {x->operand(0)};
    for (int d = 0; d < x->shape().rank(); ++d) {
      Instruction* start = x->operand(1 + d);
      if (s.starts[d] != 0 || s.limits[d] != x->shape().dim(d)) {
        DType t = start->dtype();
        double most = static_cast<double>(x->operand(0)->shape().dim(d) - x->shape().dim(d));
        start = b.Add(Opcode::kClamp, {b.ScalarConstant(t, 0), start, b.ScalarConstant(t, most)}, {});
        if (s.starts[d] != 0) start = b.Binary(Opcode::kAdd, start, b.ScalarConstant(t, static_cast<double>(s.starts[d])));
      }
      ops.push_back(start);
    }
    InstructionAttrs a;
    a.dimensions = slice->shape().dims();
    return b.Add(Opcode::kDynamicSlice, ops, a);
  }
  return nullptr;
}

}  // namespace

bool LoopCarrySplitPass::Run(Module& module) { return RewriteLoops(module, SplitLoop); }

bool SliceSinkingPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.ControlFlowComputations()) {
    int64_t limit = limit_.try_emplace(c, 2 * c->instruction_count() + kSlack).first->second;
    for (Instruction* slice : c->MakePostOrder()) {
      if (c->instruction_count() >= limit) break;
      if (!c->Contains(slice) || slice->opcode() != Opcode::kSlice) continue;
      const Instruction* x = slice->operand(0);
      // Only where the producer goes away: every user of it is a slice.
      bool all_slices = !x->users().empty() && !x->IsRoot();
      for (const Instruction* u : x->users()) all_slices = all_slices && u->opcode() == Opcode::kSlice;
      if (!all_slices) continue;
      Instruction* sunk = Sink(slice);
      if (!sunk) continue;
      sunk->set_metadata(slice->metadata());
      slice->ReplaceAllUsesWith(sunk);
      c->RemoveInstruction(slice);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
