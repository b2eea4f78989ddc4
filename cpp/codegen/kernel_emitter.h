// Kernel emission: one LLVM function per fusion. The plan says how the output index space
// is walked; the elemental emitter computes each group of lanes.
//
// Emitted signature: void @name(ptr %buffers, i64 %begin, i64 %end), where buffers holds
// the output buffers (one per tuple element of a multi-output fusion) followed by one per
// fusion operand, and [begin, end) is a range of iteration units (elements or rows).
#pragma once

#include <string>
#include <vector>

#include "codegen/buffer_access.h"
#include "codegen/elemental.h"
#include "codegen/llvm_util.h"
#include "ir/instruction.h"

namespace fj::codegen {

// A kernel built around one matrix product out[b.., i, j] = sum_k lhs[b.., i, k] * rhs[b.., k, j]
// whose other ops read it only at the output's own position (an elementwise epilogue: bias,
// activation). Its rows are computed in tiles of `rows` x `vectors` output vectors with one
// pass over k: each rhs vector loaded serves `rows` rows, each lhs element `vectors` vectors,
// and the tile's sums are independent chains (one output vector at a time re-read all of rhs
// for every output row and waited on one chain of adds). Rows go in blocks whose lhs rows
// stay in the L2 cache while each panel of the rhs (its columns of one tile) serves all the
// block's tiles; without batch dimensions the panel is first packed k-major into a stack
// buffer, a block of k at a time when it is deep. (Tiles over all columns row by row re-read the whole rhs from memory for every
// tile, and at a power-of-two row length a panel's cache lines fall in a few cache sets:
// a 1024^3 float32 product ran at 44% of JAX's speed.)
struct DotTile {
  const Instruction* dot = nullptr;  // none: no tile
  int rows = 4;
  int vectors = 4;
  int64_t block_rows = 4;
  bool pack = false;
  // With `pack`: the panel's rows (k) packed at a time; the tiles' sums wait in a stack
  // buffer between these blocks of k.
  int64_t depth_block = 1;
  // The fewest rows a thread's chunk should have: each chunk packs the whole rhs again.
  int64_t chunk_rows = 1;
  // The lhs is [batch..., K, M] (contracting before free; dot_layout.h): a gradient's x^T
  // read where it lies instead of transposed by a kernel of its own.
  bool lhs_transposed = false;
};

struct KernelPlan {
  enum class Mode {
    kFlat,  // every access follows the output's row-major order: units are elements
    kRows,  // units are rows of the output's last dimension (or one output element)
    kLinear1D,  // a rank-1 output walked by element, through the per-dimension index
    kHorizontal,  // several outputs of different shapes, one segment of units each
    kUpdate,      // an in-place dynamic-update-slice: units are rows of the update
    kWholeLoop,   // a whole loop as one kernel (whole_loop_emitter.h): units are lanes
    kScatter,     // a scatter: units are slices of the output, or update windows (PlanScatter)
  };
  Mode mode = Mode::kRows;
  int64_t units = 0;       // iteration units in total
  int64_t row_length = 1;  // kRows: elements per unit
  int width = 1;           // lanes per vector step of the innermost loop
  int reduction_width = 1; // lanes of a row reduction's inner loop
  // kRows: rows walked together, one per lane (`width` is then 1 per row's element). Short
  // rows (every reduction shorter than a vector): a reduction sums each lane's row in order,
  // as one row at a time does, so the bits are the same.
  int row_lanes = 1;
  int num_outputs = 1;
  // kRows on the CPU: the matrix product the kernel is tiled around, if any (FindDotTile).
  DotTile dot_tile;
  // kRows on the CPU, a transpose across the last dimension (PlanTiles): the rows go in
  // tiles of `tile_rows` (from multiples of it where `block_transposed`: block_transpose.h),
  // and threads take whole tiles. With few tiles the columns are split too: the units are
  // then `column_blocks` blocks of the output's rows, unit u row u % rows of block u / rows,
  // whose columns are the block's `column_block_length` (a multiple of `width`; the last
  // block's shorter) ([16, 65536] from [65536, 16]: one tile, which two threads' chunks of
  // 8 rows each walked by gathers instead, 2.5x JAX's time).
  int tile_rows = 0;
  bool block_transposed = false;
  int64_t column_blocks = 1;
  int64_t column_block_length = 0;
  // kHorizontal: where each output's units start (one unit per element), and whether
  // its elements can be walked by their linear index alone.
  std::vector<int64_t> segment_starts;
  std::vector<bool> segment_flat;
  // A reduction with side outputs: roots over the operand space of reduction `side_hero`
  // (side_output[k]) are stored by its loop, once per element it combines; the units are
  // the reduction's outputs.
  const Instruction* side_hero = nullptr;
  std::vector<bool> side_output;
  // Row-fused kernels keep costly row values in a stack buffer (IsKeptRowValue); the GPU
  // computes them again instead.
  bool keep_row_values = true;
  // The kernel is called only on ranges of whole vectors where `units` are (the CPU's thread
  // pool cuts chunks at multiples of the grain, a multiple of `width`): a kFlat or kLinear1D
  // kernel of such units then has no scalar tail. Not on the GPU (a unit per thread).
  bool whole_vector_chunks = false;
  // kScatter: the output is the operand's buffer (no copy first). Units are slices of
  // `row_length` output elements, each applying the updates that land in it in row-major
  // order; or, `scatter_by_updates` (in place, unique indices), windows of `row_length`
  // update elements. `work`: element steps in all, for the decision to run in parallel.
  bool in_place = false;
  bool scatter_by_updates = false;
  // kScatter, windows that are whole rows of the operand (CPU): units are slices of
  // `row_length` rows, each reading every window's index and combining, in order, the rows
  // that land in it, in vectors of `width`.
  bool scatter_rows = false;
  int64_t work = 0;
  // The target converts f16 <-> f32 in hardware (x86's F16C): conversions are one
  // instruction instead of integer code (same bits but for NaN payloads).
  bool native_half = false;
};

// Chooses the plan for `fusion` with at most `max_width` lanes (1 for the GPU); in
// kernel_plan.cc.
// `in_place`: its output buffer is its updated operand's (a dynamic-update-slice writes
// only the update).
KernelPlan PlanKernel(const Instruction* fusion, int max_width, bool in_place = false);

// What a kernel computes, as text: kernels with equal keys generate the same code (their
// buffers come in a table), so each target generates one function for them. The fused
// computation's structural text (Computation::StructuralText) with the fusion's shape,
// kind, whole-loop attributes, custom-call target and whether it writes in place; in
// kernel_plan.cc.
std::string KernelKey(const Instruction* fusion, bool in_place);

// Emits the CPU kernel into `module` under `name` and returns it. `may_alias`: an output may
// share its buffer with an operand (no noalias promises; every output of a group of lanes
// is computed before any is stored).
llvm::Function* EmitKernel(llvm::Module& module, const Instruction* fusion, const KernelPlan& plan,
                           const std::string& name, bool may_alias = false);

// The walk over a kernel's units that every target shares: an internal, always-inlined
// function "<name>.body"(ptr %buffer0, ..., ptr %bufferN, i64 %begin, i64 %end) computing
// units [begin, end), outputs first among the buffers. Targets wrap it: the CPU's kernel
// unpacks a buffer table (EmitKernel), a GPU kernel calls it for its threads' units.
// `warp`: the lanes of a GPU warp take each unit together (CooperativeReductions).
llvm::Function* EmitKernelBody(llvm::Module& module, const Instruction* fusion, const KernelPlan& plan,
                               const std::string& name, bool may_alias,
                               const WarpCooperation* warp = nullptr);

// The CPU's kernel ABI around a body: void @name(ptr %buffers, i64 %begin, i64 %end), the
// buffers in a table (FjKernelFn).
llvm::Function* EmitTableWrapper(llvm::Module& module, llvm::Function* body, const std::string& name);

// The reductions the lanes of a GPU warp can compute together in a unit of `plan`: a row
// kernel's per-row reductions (the lanes then split each row's elements), or the row
// reduction a kernel's outputs are built around (the lanes compute each output together).
// Empty when the plan has none.
std::vector<const Instruction*> CooperativeReductions(const Instruction* fusion, const KernelPlan& plan);

}  // namespace fj::codegen
