// Shape rules for every opcode (see shape_inference.h).
#include "ir/shape_inference.h"

#include "ir/whole_loop.h"

#include <algorithm>
#include <set>

#include "ir/computation.h"
#include "support/error.h"

namespace fj {
namespace {

std::string Name(Opcode op) { return std::string(OpcodeName(op)); }

const Shape& ArrayOperand(Opcode op, const std::vector<const Shape*>& operands, int i) {
  const Shape& s = *operands[i];
  if (!s.IsArray()) ThrowInvalidArgument(Name(op), ": operand ", i, " is a tuple ", s.ToString());
  return s;
}

void CheckDims(Opcode op, const std::vector<int64_t>& dims, int rank, bool sorted_unique) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      ThrowInvalidArgument(Name(op), ": dimension ", d, " out of range for rank ", rank);
    }
    if (!seen.insert(d).second) ThrowInvalidArgument(Name(op), ": dimension ", d, " repeated");
  }
  if (sorted_unique && !std::is_sorted(dims.begin(), dims.end())) {
    ThrowInvalidArgument(Name(op), ": dimensions ", DimsToString(dims), " must be increasing");
  }
}

void RequireDTypeClass(Opcode op, DType t, bool pred, bool ints, bool floats) {
  bool ok = (pred && IsPred(t)) || (ints && IsInteger(t)) || (floats && IsFloat(t));
  if (!ok) {
    std::string want;
    auto add = [&](const char* w) { want += (want.empty() ? "" : " or ") + std::string(w); };
    if (pred) add("pred");
    if (ints) add("integer");
    if (floats) add("floating-point");
    ThrowInvalidArgument(Name(op), " needs ", want, " operands, got ", DTypeName(t));
  }
}

Shape UnaryShape(Opcode op, const Shape& x, const Shape* requested) {
  DType t = x.dtype();
  switch (op) {
    case Opcode::kNegate:
    case Opcode::kAbs:
    case Opcode::kSign:
      RequireDTypeClass(op, t, false, true, true);
      return x;
    case Opcode::kNot:
      RequireDTypeClass(op, t, true, true, false);
      return x;
    case Opcode::kPopulationCount:
      RequireDTypeClass(op, t, false, true, false);
      return x;
    case Opcode::kIsFinite:
      RequireDTypeClass(op, t, false, false, true);
      return x.WithDType(DType::kPred);
    case Opcode::kCopy:
      return x;
    case Opcode::kConvert:
    case Opcode::kBitcastConvert: {
      if (!requested || !requested->IsArray()) {
        ThrowInvalidArgument(Name(op), " needs a result element type");
      }
      if (!requested->SameDims(x)) {
        ThrowInvalidArgument(Name(op), ": result ", requested->ToString(),
                             " and operand ", x.ToString(), " differ in dimensions");
      }
      if (op == Opcode::kBitcastConvert &&
          (DTypeBits(requested->dtype()) != DTypeBits(t) || IsPred(t))) {
        ThrowInvalidArgument("bitcast-convert between ", DTypeName(t), " and ",
                             DTypeName(requested->dtype()), " needs equal bit widths");
      }
      return *requested;
    }
    default:  // floor, ceil, round and the transcendental functions
      RequireDTypeClass(op, t, false, false, true);
      return x;
  }
}

Shape BinaryShape(Opcode op, const Shape& a, const Shape& b) {
  if (!a.SameDims(b) || a.dtype() != b.dtype()) {
    ThrowInvalidArgument(Name(op), ": operands ", a.ToString(), " and ", b.ToString(),
                         " must have the same shape and element type");
  }
  DType t = a.dtype();
  switch (op) {
    case Opcode::kCompare:
      return a.WithDType(DType::kPred);
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
      RequireDTypeClass(op, t, true, true, op == Opcode::kMaximum || op == Opcode::kMinimum);
      return a;
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightLogical:
    case Opcode::kShiftRightArithmetic:
      RequireDTypeClass(op, t, false, true, false);
      return a;
    case Opcode::kAtan2:
      RequireDTypeClass(op, t, false, false, true);
      return a;
    default:  // add, subtract, multiply, divide, remainder, power
      RequireDTypeClass(op, t, false, true, true);
      return a;
  }
}

Shape ComputationResult(const Computation* c) {
  FJ_CHECK(c->root() != nullptr, "computation ", c->name(), " has no root");
  return c->root()->shape();
}

void CheckParametersMatch(Opcode op, const Computation* c,
                          const std::vector<const Shape*>& shapes, size_t first) {
  size_t n = shapes.size() - first;
  if (static_cast<size_t>(c->num_parameters()) != n) {
    ThrowInvalidArgument(Name(op), ": computation %", c->name(), " takes ", c->num_parameters(),
                         " parameters but is given ", n);
  }
  for (size_t i = 0; i < n; ++i) {
    if (c->parameter(i)->shape() != *shapes[first + i]) {
      ThrowInvalidArgument(Name(op), ": parameter ", i, " of %", c->name(), " is ",
                           c->parameter(i)->shape().ToString(), " but the operand is ",
                           shapes[first + i]->ToString());
    }
  }
}

void CheckCalledCount(Opcode op, const std::vector<Computation*>& called, size_t n) {
  if (called.size() != n) {
    ThrowInvalidArgument(Name(op), " calls ", called.size(), " computations, needs ", n);
  }
}

// The indices of a gather or scatter: integers whose index vectors (along index_vector_dim,
// or one implicit element when it is the rank) hold `starts` start indices.
void CheckIndexVectors(Opcode op, const Shape& indices, int64_t index_vector_dim,
                       const std::vector<int64_t>& dims_map, const char* map_name) {
  if (!IsInteger(indices.dtype())) ThrowInvalidArgument(Name(op), ": indices ", indices.ToString(), " must be integers");
  if (index_vector_dim < 0 || index_vector_dim > indices.rank()) {
    ThrowInvalidArgument(Name(op), ": index_vector_dim ", index_vector_dim, " for indices ", indices.ToString());
  }
  int64_t vector_size = index_vector_dim == indices.rank() ? 1 : indices.dim(static_cast<int>(index_vector_dim));
  if (vector_size != static_cast<int64_t>(dims_map.size())) {
    ThrowInvalidArgument(Name(op), ": index vectors of ", vector_size, " elements for ", map_name, " ",
                         DimsToString(dims_map));
  }
}

}  // namespace

Shape InferGatherShape(const Shape& x, const Shape& indices, const GatherDims& g,
                       const std::vector<int64_t>& slice_sizes) {
  CheckIndexVectors(Opcode::kGather, indices, g.index_vector_dim, g.start_index_map, "start_index_map");
  CheckDims(Opcode::kGather, g.start_index_map, x.rank(), false);
  CheckDims(Opcode::kGather, g.collapsed_slice_dims, x.rank(), true);
  if (static_cast<int>(slice_sizes.size()) != x.rank()) {
    ThrowInvalidArgument("gather: slice_sizes ", DimsToString(slice_sizes), " for ", x.ToString());
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > x.dim(d)) {
      ThrowInvalidArgument("gather: slice size ", slice_sizes[d], " exceeds dimension ", d, " of ", x.ToString());
    }
  }
  std::vector<int64_t> offset_sizes;
  for (int d = 0; d < x.rank(); ++d) {
    bool collapsed = std::count(g.collapsed_slice_dims.begin(), g.collapsed_slice_dims.end(), d);
    if (collapsed && slice_sizes[d] != 1) ThrowInvalidArgument("gather: collapsed dimension ", d, " has slice size ", slice_sizes[d]);
    if (!collapsed) offset_sizes.push_back(slice_sizes[d]);
  }
  if (g.offset_dims.size() != offset_sizes.size()) {
    ThrowInvalidArgument("gather: offset_dims ", DimsToString(g.offset_dims), " for ", offset_sizes.size(), " slice dimensions");
  }
  std::vector<int64_t> batch_sizes;
  for (int d = 0; d < indices.rank(); ++d) {
    if (d != g.index_vector_dim) batch_sizes.push_back(indices.dim(d));
  }
  int out_rank = static_cast<int>(batch_sizes.size() + offset_sizes.size());
  CheckDims(Opcode::kGather, g.offset_dims, out_rank, true);
  std::vector<int64_t> dims(out_rank);
  size_t next_offset = 0, next_batch = 0;
  for (int d = 0; d < out_rank; ++d) {
    bool offset = next_offset < g.offset_dims.size() && g.offset_dims[next_offset] == d;
    dims[d] = offset ? offset_sizes[next_offset++] : batch_sizes[next_batch++];
  }
  return Shape(x.dtype(), dims);
}


void CheckScatter(const Shape& x, const Shape& indices, const Shape& updates, const ScatterDims& s) {
  CheckIndexVectors(Opcode::kScatter, indices, s.index_vector_dim, s.scatter_dims_to_operand_dims,
                    "scatter_dims_to_operand_dims");
  if (updates.dtype() != x.dtype()) {
    ThrowInvalidArgument("scatter: updates ", updates.ToString(), " must have the operand's type ", DTypeName(x.dtype()));
  }
  CheckDims(Opcode::kScatter, s.scatter_dims_to_operand_dims, x.rank(), false);
  CheckDims(Opcode::kScatter, s.inserted_window_dims, x.rank(), true);
  CheckDims(Opcode::kScatter, s.update_window_dims, updates.rank(), true);
  if (s.update_window_dims.size() + s.inserted_window_dims.size() != static_cast<size_t>(x.rank())) {
    ThrowInvalidArgument("scatter: ", s.update_window_dims.size(), " window dimensions and ", s.inserted_window_dims.size(),
                         " inserted ones for an operand of rank ", x.rank());
  }
  size_t w = 0;
  for (int d = 0; d < x.rank(); ++d) {
    if (std::count(s.inserted_window_dims.begin(), s.inserted_window_dims.end(), d)) continue;
    int64_t size = updates.dim(static_cast<int>(s.update_window_dims[w++]));
    if (size > x.dim(d)) ThrowInvalidArgument("scatter: a window of ", size, " along dimension ", d, " of ", x.ToString());
  }
  std::vector<int64_t> batch;
  for (int d = 0; d < indices.rank(); ++d) {
    if (d != s.index_vector_dim) batch.push_back(indices.dim(d));
  }
  std::vector<int64_t> update_batch;
  for (int d = 0; d < updates.rank(); ++d) {
    if (!std::count(s.update_window_dims.begin(), s.update_window_dims.end(), d)) update_batch.push_back(updates.dim(d));
  }
  if (batch != update_batch) {
    ThrowInvalidArgument("scatter: updates ", updates.ToString(), " do not match the indices ", indices.ToString(),
                         " (scatter dimensions ", DimsToString(update_batch), " against ", DimsToString(batch), ")");
  }
}

Shape InferShape(Opcode op, const std::vector<const Shape*>& operands,
                 const InstructionAttrs& a, const std::vector<Computation*>& called,
                 const Shape* requested) {
  int arity = OpcodeArity(op);
  if (arity >= 0 && static_cast<int>(operands.size()) != arity) {
    ThrowInvalidArgument(Name(op), " takes ", arity, " operands, got ", operands.size());
  }
  if (IsElementwise(op) && op != Opcode::kSelect && op != Opcode::kClamp) {
    for (size_t i = 0; i < operands.size(); ++i) ArrayOperand(op, operands, i);
  }
  Shape result;
  switch (op) {
    case Opcode::kParameter:
      if (!requested) ThrowInvalidArgument("parameter needs a shape");
      result = *requested;
      break;
    case Opcode::kConstant:
      if (!a.literal) ThrowInvalidArgument("constant without a value");
      result = a.literal->shape();
      break;
    case Opcode::kIota: {
      if (!requested || !requested->IsArray()) ThrowInvalidArgument("iota needs an array shape");
      if (a.dimensions.size() != 1 || a.dimensions[0] < 0 ||
          a.dimensions[0] >= requested->rank()) {
        ThrowInvalidArgument("iota: iota_dimension out of range for ", requested->ToString());
      }
      RequireDTypeClass(op, requested->dtype(), false, true, true);
      result = *requested;
      break;
    }
    case Opcode::kSelect: {
      const Shape& p = ArrayOperand(op, operands, 0);
      const Shape& t = ArrayOperand(op, operands, 1);
      const Shape& f = ArrayOperand(op, operands, 2);
      if (p.dtype() != DType::kPred) ThrowInvalidArgument("select: predicate must be pred, got ", p.ToString());
      if (t != f) ThrowInvalidArgument("select: branches ", t.ToString(), " and ", f.ToString(), " differ");
      if (!p.SameDims(t)) ThrowInvalidArgument("select: predicate ", p.ToString(), " and branches ", t.ToString(), " differ in dimensions");
      result = t;
      break;
    }
    case Opcode::kClamp: {
      const Shape& lo = ArrayOperand(op, operands, 0);
      const Shape& x = ArrayOperand(op, operands, 1);
      const Shape& hi = ArrayOperand(op, operands, 2);
      for (const Shape* s : {&lo, &hi}) {
        if (s->dtype() != x.dtype() || !(s->IsScalar() || s->SameDims(x))) {
          ThrowInvalidArgument("clamp: bound ", s->ToString(), " does not match ", x.ToString());
        }
      }
      RequireDTypeClass(op, x.dtype(), false, true, true);
      result = x;
      break;
    }
    case Opcode::kFma: {
      const Shape& x = *operands[0];
      for (int i = 1; i < 3; ++i) {
        if (*operands[i] != x) {
          ThrowInvalidArgument("fma: operands ", x.ToString(), " and ", operands[i]->ToString(),
                               " must have the same shape and element type");
        }
      }
      RequireDTypeClass(op, x.dtype(), false, false, true);
      result = x;
      break;
    }
    case Opcode::kBroadcast: {
      const Shape& x = ArrayOperand(op, operands, 0);
      if (!requested || !requested->IsArray()) ThrowInvalidArgument("broadcast needs a result shape");
      if (requested->dtype() != x.dtype()) ThrowInvalidArgument("broadcast changes the element type");
      if (static_cast<int>(a.dimensions.size()) != x.rank()) {
        ThrowInvalidArgument("broadcast: ", a.dimensions.size(), " dimensions for operand ", x.ToString());
      }
      CheckDims(op, a.dimensions, requested->rank(), true);
      for (int i = 0; i < x.rank(); ++i) {
        int64_t out = requested->dim(a.dimensions[i]);
        if (x.dim(i) != out && x.dim(i) != 1) {
          ThrowInvalidArgument("broadcast: operand ", x.ToString(), " dimension ", i,
                               " does not fit result ", requested->ToString());
        }
      }
      result = *requested;
      break;
    }
    case Opcode::kReshape: {
      const Shape& x = ArrayOperand(op, operands, 0);
      if (!requested || !requested->IsArray()) ThrowInvalidArgument("reshape needs a result shape");
      if (requested->dtype() != x.dtype() || requested->NumElements() != x.NumElements()) {
        ThrowInvalidArgument("reshape: cannot reshape ", x.ToString(), " to ", requested->ToString());
      }
      result = *requested;
      break;
    }
    case Opcode::kTranspose: {
      const Shape& x = ArrayOperand(op, operands, 0);
      if (static_cast<int>(a.dimensions.size()) != x.rank()) {
        ThrowInvalidArgument("transpose: permutation ", DimsToString(a.dimensions), " for ", x.ToString());
      }
      CheckDims(op, a.dimensions, x.rank(), false);
      std::vector<int64_t> dims;
      for (int64_t d : a.dimensions) dims.push_back(x.dim(d));
      result = Shape(x.dtype(), dims);
      break;
    }
    case Opcode::kReverse: {
      const Shape& x = ArrayOperand(op, operands, 0);
      CheckDims(op, a.dimensions, x.rank(), false);
      result = x;
      break;
    }
    case Opcode::kSlice: {
      const Shape& x = ArrayOperand(op, operands, 0);
      const SliceConfig& s = a.slice;
      if (static_cast<int>(s.starts.size()) != x.rank() || s.limits.size() != s.starts.size() ||
          s.strides.size() != s.starts.size()) {
        ThrowInvalidArgument("slice: config has the wrong rank for ", x.ToString());
      }
      std::vector<int64_t> dims;
      for (int i = 0; i < x.rank(); ++i) {
        if (s.starts[i] < 0 || s.limits[i] < s.starts[i] || s.limits[i] > x.dim(i) || s.strides[i] < 1) {
          ThrowInvalidArgument("slice: [", s.starts[i], ":", s.limits[i], ":", s.strides[i],
                               "] is out of bounds for dimension ", i, " of ", x.ToString());
        }
        // ceil((limit - start) / stride), written so that no step can overflow (a stride
        // near 2^63 is legal: it takes only the first element).
        int64_t n = s.limits[i] - s.starts[i];
        dims.push_back(n == 0 ? 0 : (n - 1) / s.strides[i] + 1);
      }
      result = Shape(x.dtype(), dims);
      break;
    }
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: {
      bool update = op == Opcode::kDynamicUpdateSlice;
      if (operands.empty()) ThrowInvalidArgument(Name(op), " needs operands");
      const Shape& x = ArrayOperand(op, operands, 0);
      size_t first_index = update ? 2 : 1;
      if (operands.size() != first_index + x.rank()) {
        ThrowInvalidArgument(Name(op), ": needs ", x.rank(), " start indices");
      }
      for (size_t i = first_index; i < operands.size(); ++i) {
        const Shape& s = ArrayOperand(op, operands, i);
        if (!s.IsScalar() || !IsInteger(s.dtype())) {
          ThrowInvalidArgument(Name(op), ": start index ", s.ToString(), " must be an integer scalar");
        }
      }
      std::vector<int64_t> sizes = a.dimensions;
      if (update) {
        const Shape& u = ArrayOperand(op, operands, 1);
        if (u.dtype() != x.dtype() || u.rank() != x.rank()) {
          ThrowInvalidArgument("dynamic-update-slice: update ", u.ToString(), " does not fit ", x.ToString());
        }
        sizes = u.dims();
      }
      if (static_cast<int>(sizes.size()) != x.rank()) {
        ThrowInvalidArgument("dynamic-slice: sizes ", DimsToString(sizes), " for ", x.ToString());
      }
      for (int i = 0; i < x.rank(); ++i) {
        if (sizes[i] < 0 || sizes[i] > x.dim(i)) {
          ThrowInvalidArgument(Name(op), ": size ", sizes[i], " exceeds dimension ", i, " of ", x.ToString());
        }
      }
      result = update ? x : Shape(x.dtype(), sizes);
      break;
    }
    case Opcode::kConcatenate: {
      if (operands.empty()) ThrowInvalidArgument("concatenate needs operands");
      if (a.dimensions.size() != 1) ThrowInvalidArgument("concatenate needs one dimension");
      const Shape& first = ArrayOperand(op, operands, 0);
      int64_t d = a.dimensions[0];
      if (d < 0 || d >= first.rank()) ThrowInvalidArgument("concatenate: dimension ", d, " out of range for ", first.ToString());
      std::vector<int64_t> dims = first.dims();
      dims[d] = 0;
      for (size_t i = 0; i < operands.size(); ++i) {
        const Shape& s = ArrayOperand(op, operands, i);
        bool ok = s.dtype() == first.dtype() && s.rank() == first.rank();
        for (int j = 0; ok && j < s.rank(); ++j) ok = j == d || s.dim(j) == first.dim(j);
        if (!ok) ThrowInvalidArgument("concatenate: operand ", s.ToString(), " does not match ", first.ToString());
        dims[d] = CheckedAdd(dims[d], s.dim(d), "concatenate");
      }
      result = Shape(first.dtype(), dims);
      break;
    }
    case Opcode::kPad: {
      const Shape& x = ArrayOperand(op, operands, 0);
      const Shape& v = ArrayOperand(op, operands, 1);
      if (!v.IsScalar() || v.dtype() != x.dtype()) ThrowInvalidArgument("pad: padding value must be a scalar of the operand's type");
      if (static_cast<int>(a.padding.size()) != x.rank()) ThrowInvalidArgument("pad: config has the wrong rank");
      std::vector<int64_t> dims;
      for (int i = 0; i < x.rank(); ++i) {
        const PadDim& p = a.padding[i];
        if (p.interior < 0) ThrowInvalidArgument("pad: negative interior padding");
        int64_t n = CheckedAdd(
            CheckedAdd(p.low, p.high, "pad"),
            CheckedAdd(x.dim(i), CheckedMul(std::max<int64_t>(x.dim(i) - 1, 0), p.interior, "pad"), "pad"),
            "pad");
        if (n < 0) ThrowInvalidArgument("pad: negative result dimension");
        dims.push_back(n);
      }
      result = Shape(x.dtype(), dims);
      break;
    }
    case Opcode::kScatter: {
      const Shape& x = ArrayOperand(op, operands, 0);
      const Shape& indices = ArrayOperand(op, operands, 1);
      const Shape& updates = ArrayOperand(op, operands, 2);
      CheckScatter(x, indices, updates, a.scatter);
      CheckCalledCount(op, called, 1);
      Shape scalar = Shape::Scalar(x.dtype());
      std::vector<const Shape*> args = {&scalar, &scalar};
      CheckParametersMatch(op, called[0], args, 0);
      if (ComputationResult(called[0]) != scalar) ThrowInvalidArgument("scatter: combiner must return ", scalar.ToString());
      result = x;
      break;
    }
    case Opcode::kReduce: {
      const Shape& x = ArrayOperand(op, operands, 0);
      const Shape& init = ArrayOperand(op, operands, 1);
      if (!init.IsScalar() || init.dtype() != x.dtype()) {
        ThrowInvalidArgument("reduce: init ", init.ToString(), " must be a scalar of the operand's type");
      }
      CheckDims(op, a.dimensions, x.rank(), true);
      CheckCalledCount(op, called, 1);
      Shape scalar = Shape::Scalar(x.dtype());
      std::vector<const Shape*> args = {&scalar, &scalar};
      CheckParametersMatch(op, called[0], args, 0);
      if (ComputationResult(called[0]) != scalar) ThrowInvalidArgument("reduce: combiner must return ", scalar.ToString());
      std::vector<int64_t> dims;
      for (int i = 0; i < x.rank(); ++i) {
        if (!std::count(a.dimensions.begin(), a.dimensions.end(), i)) dims.push_back(x.dim(i));
      }
      result = Shape(x.dtype(), dims);
      break;
    }
    case Opcode::kArgMax:
    case Opcode::kArgMin: {
      const Shape& x = ArrayOperand(op, operands, 0);
      if (a.dimensions.size() != 1) ThrowInvalidArgument(Name(op), " reduces exactly one dimension");
      CheckDims(op, a.dimensions, x.rank(), true);
      if (x.dim(a.dimensions[0]) == 0) ThrowInvalidArgument(Name(op), " of an empty dimension");
      if (!requested || !requested->IsArray() ||
          !(requested->dtype() == DType::kS32 || requested->dtype() == DType::kS64)) {
        ThrowInvalidArgument(Name(op), " needs an s32 or s64 result");
      }
      std::vector<int64_t> dims = x.dims();
      dims.erase(dims.begin() + a.dimensions[0]);
      result = Shape(requested->dtype(), dims);
      break;
    }
    case Opcode::kGather:
      result = InferGatherShape(ArrayOperand(op, operands, 0), ArrayOperand(op, operands, 1), a.gather, a.dimensions);
      break;
    case Opcode::kDot: {
      const Shape& l = ArrayOperand(op, operands, 0);
      const Shape& r = ArrayOperand(op, operands, 1);
      const DotDims& d = a.dot;
      if (l.dtype() != r.dtype()) ThrowInvalidArgument("dot: operands ", l.ToString(), " and ", r.ToString(), " differ in type");
      RequireDTypeClass(op, l.dtype(), false, true, true);
      if (d.lhs_batch.size() != d.rhs_batch.size() || d.lhs_contracting.size() != d.rhs_contracting.size()) {
        ThrowInvalidArgument("dot: dimension numbers do not pair up");
      }
      std::vector<int64_t> lhs_used = d.lhs_batch, rhs_used = d.rhs_batch;
      lhs_used.insert(lhs_used.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
      rhs_used.insert(rhs_used.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
      CheckDims(op, lhs_used, l.rank(), false);
      CheckDims(op, rhs_used, r.rank(), false);
      std::vector<int64_t> dims;
      for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
        if (l.dim(d.lhs_batch[i]) != r.dim(d.rhs_batch[i])) ThrowInvalidArgument("dot: batch dimensions differ in size");
        dims.push_back(l.dim(d.lhs_batch[i]));
      }
      for (size_t i = 0; i < d.lhs_contracting.size(); ++i) {
        if (l.dim(d.lhs_contracting[i]) != r.dim(d.rhs_contracting[i])) {
          ThrowInvalidArgument("dot: contracting dimensions of ", l.ToString(), " and ", r.ToString(), " differ in size");
        }
      }
      for (int i = 0; i < l.rank(); ++i) {
        if (!std::count(lhs_used.begin(), lhs_used.end(), i)) dims.push_back(l.dim(i));
      }
      for (int i = 0; i < r.rank(); ++i) {
        if (!std::count(rhs_used.begin(), rhs_used.end(), i)) dims.push_back(r.dim(i));
      }
      result = Shape(l.dtype(), dims);
      break;
    }
    case Opcode::kTuple: {
      std::vector<Shape> elements;
      for (const Shape* s : operands) elements.push_back(*s);
      result = Shape::Tuple(elements);
      break;
    }
    case Opcode::kGetTupleElement: {
      const Shape& t = *operands[0];
      if (!t.IsTuple() || a.index < 0 || a.index >= static_cast<int64_t>(t.tuple_shapes().size())) {
        ThrowInvalidArgument("get-tuple-element: index ", a.index, " for ", t.ToString());
      }
      result = t.tuple_shape(a.index);
      break;
    }
    case Opcode::kWhile: {
      CheckCalledCount(op, called, 2);
      CheckParametersMatch(op, called[0], operands, 0);
      CheckParametersMatch(op, called[1], operands, 0);
      if (ComputationResult(called[0]) != Shape::Scalar(DType::kPred)) {
        ThrowInvalidArgument("while: condition must return pred[]");
      }
      if (ComputationResult(called[1]) != *operands[0]) {
        ThrowInvalidArgument("while: body returns ", ComputationResult(called[1]).ToString(),
                             " but the loop state is ", operands[0]->ToString());
      }
      result = *operands[0];
      break;
    }
    case Opcode::kConditional: {
      if (called.empty() || operands.size() != called.size() + 1) {
        ThrowInvalidArgument("conditional: needs a selector and one operand per branch");
      }
      const Shape& sel = ArrayOperand(op, operands, 0);
      bool ok = sel.IsScalar() && (sel.dtype() == DType::kS32 ||
                                   (sel.dtype() == DType::kPred && called.size() == 2));
      if (!ok) ThrowInvalidArgument("conditional: selector must be pred[] (two branches) or s32[]");
      for (size_t i = 0; i < called.size(); ++i) {
        std::vector<const Shape*> arg = {operands[i + 1]};
        CheckParametersMatch(op, called[i], arg, 0);
        if (ComputationResult(called[i]) != ComputationResult(called[0])) {
          ThrowInvalidArgument("conditional: branches return different shapes");
        }
      }
      result = ComputationResult(called[0]);
      break;
    }
    case Opcode::kCall:
    case Opcode::kFusion: {
      CheckCalledCount(op, called, 1);
      if (op == Opcode::kFusion && a.fusion_kind == FusionKind::kWholeLoop) {
        // The step computation takes the operands and, last, the counter (see whole_loop.h).
        const Computation* step = called[0];
        if (step->num_parameters() != static_cast<int>(operands.size()) + 1) {
          ThrowInvalidArgument("whole-loop fusion: ", operands.size(), " operands for a step of ",
                               step->num_parameters(), " parameters (the last is the counter)");
        }
        for (size_t i = 0; i < operands.size(); ++i) {
          if (step->parameter(static_cast<int>(i))->shape() != *operands[i]) {
            ThrowInvalidArgument("whole-loop fusion: operand ", i, " is ", operands[i]->ToString(), " but the step takes ",
                                 step->parameter(static_cast<int>(i))->shape().ToString());
          }
        }
        result = WholeLoopShape(a, *step);
        break;
      }
      CheckParametersMatch(op, called[0], operands, 0);
      result = ComputationResult(called[0]);
      break;
    }
    case Opcode::kCustomCall:
      if (!requested) ThrowInvalidArgument("custom-call needs a result shape");
      if (a.custom_call_target.empty()) ThrowInvalidArgument("custom-call needs a target");
      result = *requested;
      break;
    default:
      if (OpcodeArity(op) == 1) {
        result = UnaryShape(op, *operands[0], requested);
      } else if (OpcodeArity(op) == 2) {
        result = BinaryShape(op, *operands[0], *operands[1]);
      } else {
        ThrowInternal("no shape rule for ", Name(op));
      }
  }
  if (requested && *requested != result) {
    ThrowInvalidArgument(Name(op), ": shape ", requested->ToString(), " should be ", result.ToString());
  }
  CheckArraySize(result, Name(op).data());
  return result;
}

std::string ComputationSignature(const Computation& c) {
  std::string s = "(";
  for (int i = 0; i < c.num_parameters(); ++i) {
    if (i) s += ", ";
    s += c.parameter(i) ? c.parameter(i)->shape().ToString() : "?";
  }
  return s + ") -> " + (c.root() ? c.root()->shape().ToString() : "?");
}

}  // namespace fj
