// What a kernel is built around, read from its fused computation. Fusion decides kernels
// with these and codegen plans them with the same answers (one definition, not two).
#pragma once

#include <cstdint>
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

// Whether a kernel (or one output of it, `root`) can walk a flat range of `elements`:
// every value it reads is at the output's own linear position (elementwise ops, reshapes,
// scalars, rank-1 iota).
bool IsFlatFrom(const Instruction* root, int64_t elements);
bool IsFlat(const Computation& fused, int64_t elements);

// Rows shorter than a vector (a policy's few actions, a bias over them) are walked a block
// of ShortRowLanes rows at a time, one row per lane (codegen's KernelPlan::row_lanes): the
// block is copied into lanes (position-major) and back. How, for rows of `length` elements
// of `element_bytes` on a CPU of `max_width` 32-bit lanes:
enum class RowCopy {
  // A tree of two-input shuffles per output vector, one per input vector it takes lanes
  // from (rows up to 6 long, or 8 without the transpose: rows of 10 to 15 ran up to 3x
  // slower this way than copied element by element).
  kShuffleTree,
  // Where a block's row fits one vector register: the rows loaded with a mask and
  // transposed by log2(16) stages of 16 shuffles (rows of 7 to 15: 1.5-3.4x faster than
  // element by element; slower than the tree below 7).
  kTranspose,
  kElementwise,  // element by element: scalar loads and stores
};
RowCopy HowRowsCopy(int64_t length, int max_width, int element_bytes);
// The lanes of `element_bytes` values a vector register of `max_width` 32-bit lanes holds,
// at most a block's rows (ShortRowLanes): the vectors the copies move.
int RowCopyVectorLanes(int max_width, int element_bytes);

// How a kernel (a fusion, or a single reduce) on a CPU of `max_width` lanes walks its short
// rows: codegen plans by it (PlanKernel) and the cost model prices it.
struct ShortRows {
  int64_t length = 0;     // the rows' length; 0: the kernel has no short rows
  bool in_lanes = false;  // a block of ShortRowLanes rows at a time, one per lane
  bool one_at_a_time = false;  // else: each row's elements one at a time, in no vector
  // In lanes: the elements copied into lanes and back per call, by RowCopy.
  double copied[3] = {0, 0, 0};
  double copied_total() const { return copied[0] + copied[1] + copied[2]; }
  // The share of the kernel's elements computed one at a time: all of them one at a time;
  // with vectors along rows (rows not short), each row's last (length mod vector) ones.
  double scalar_share = 0;
};
ShortRows ShortRowWalk(const Instruction* kernel, int max_width);

// Whether every reader of `value` in its computation, and every reader of those in turn,
// is an elementwise op with `value`'s dimensions: `value` is read only at its own positions
// (an epilogue), so a kernel may hand each position its value from elsewhere.
bool ReadOnlyAtOwnPositions(const Instruction* value);

// A transpose a CPU kernel reads by square blocks of vectors transposed in registers (a
// block of its operand's rows loaded whole, then log2(lanes) stages of shuffles), where
// its lanes would otherwise be gathered one at a time: it brings its operand's minor
// dimension to its second-to-last (the kernel's rows), the kernel walks the transpose's
// own dimensions with no reduction or product, its rows at least kMaxBlockLanes long and,
// above rank 2, in runs of whole blocks of kMaxBlockLanes rows (a block's rows share their
// other outer indices), and only elementwise ops read it on the way to the outputs. 32-
// and 64-bit elements. Codegen blocks by it and the cost model prices it.
constexpr int kMaxBlockLanes = 16;
bool IsBlockTransposed(const Instruction* transpose);

}  // namespace fj
