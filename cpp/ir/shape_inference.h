// Shape rules: the result shape of an instruction from its operands and attributes.
// Shared by the builder (which fills in shapes) and the verifier (which re-checks them).
#pragma once

#include <vector>

#include "ir/instruction.h"

namespace fj {

// Returns the result shape, or throws fj::Error(kInvalidArgument) saying what is wrong.
// `requested` is the caller's shape for ops whose result the operands do not determine
// (parameter, iota, convert, bitcast-convert, broadcast, reshape, argmax, custom-call); it
// may be null for the others, and if given it must equal the inferred shape.
Shape InferShape(Opcode opcode, const std::vector<const Shape*>& operands,
                 const InstructionAttrs& attrs, const std::vector<Computation*>& called,
                 const Shape* requested);

// The shape of the computation's parameters and root, as "(f32[4], s32[]) -> f32[4]".
std::string ComputationSignature(const Computation& c);

// Checks a scatter's operands against its dimension numbers (XLA's rules); throws.
void CheckScatter(const Shape& operand, const Shape& indices, const Shape& updates, const ScatterDims& dims);

// gather's result shape (XLA's rules): the indices' batch dimensions (all but
// index_vector_dim) in order at the output positions not in offset_dims, and the slice's
// non-collapsed dimensions at offset_dims.
Shape InferGatherShape(const Shape& operand, const Shape& indices, const GatherDims& dims,
                       const std::vector<int64_t>& slice_sizes);

}  // namespace fj
