// What a kernel is built around, read from its fused computation. Fusion decides kernels
// with these and codegen plans them with the same answers (one definition, not two).
#pragma once

#include <vector>

#include "ir/computation.h"

namespace fj {

// The values a kernel writes: the root's tuple elements, or the root.
std::vector<const Instruction*> KernelRoots(const Computation& fused);

// reduce, argmax, argmin.
bool IsReduction(const Instruction* instr);
inline bool IsReduce(const Instruction* instr) { return instr->opcode() == Opcode::kReduce; }

// A reduce whose innermost reduced dimension is its operand's last (rows reduced one by one).
bool IsRowReduction(const Instruction* instr);

// The reduction a kernel is built around, if any: a root, or an instruction for which
// `is_hero` holds reached from a root through elementwise ops that keep the root's shape (an
// epilogue). Fusion asks for any reduction (argmax too); codegen's reduction loops are built
// around a kReduce (IsReduce).
const Instruction* ReductionHero(const Computation& fused, bool (*is_hero)(const Instruction*) = IsReduction);

// Whether every reader of `value` in its computation, and every reader of those in turn,
// is an elementwise op with `value`'s dimensions: `value` is read only at its own positions
// (an epilogue), so a kernel may hand each position its value from elsewhere.
bool ReadOnlyAtOwnPositions(const Instruction* value);

}  // namespace fj
