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

// The reduction a kernel with side outputs is built around: a kReduce of its operand's last
// dimensions (ReductionHero), with roots that each have its output's shape or its operand's
// number of elements (at least one of the latter, stored by the reduction's loop once per
// element it combines). Null if there is none.
const Instruction* SideOutputHero(const Computation& fused);

// The shape a kernel's loop walks: its side-output hero's output, or its first root's.
const Shape& KernelShape(const Computation& fused);

// The shape whose rows a kernel walks one at a time, or null: the kernel's shape when it
// has rank >= 2 and every output has it (or is a side output: codegen's row plan), or the
// operand of the row reduction a rank-1 kernel is built around (one output per row). Only
// such a kernel computes each per-row reduction once per row and a value constant along a
// row once for the row; one with outputs of different shapes walks each by element. Only
// the first kind keeps row values in buffers (IsKeptRowValue).
const Shape* RowSpace(const Computation& fused);

// Whether every reader of `value` in its computation, and every reader of those in turn,
// is an elementwise op with `value`'s dimensions: `value` is read only at its own positions
// (an epilogue), so a kernel may hand each position its value from elsewhere.
bool ReadOnlyAtOwnPositions(const Instruction* value);

}  // namespace fj
