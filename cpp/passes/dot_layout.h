// Dot layout (as XLA's DotDecomposer canonicalises dots, and its algebraic simplifier's dot
// strength reduction): every dot becomes one of three forms the CPU computes well.
// - A product with sums over K > 1 and N > 1 outputs per row is computed as
//   [batch..., M, K] x [batch..., K, N] -> [batch..., M, N], batch dimensions leading:
//   the operands are transposed into that layout where they are not in it (a kernel of its
//   own, one pass over the operand) and their free and contracting dimensions flattened (a
//   reshape, which only reinterprets the buffer), and the result reshaped back. The CPU's
//   product is tiled only in this layout (kernel_plan.cc, FindDotTile); other layouts were
//   computed an element at a time, with a gather per lane and step: x @ w over a [B, T, D]
//   x was 2.8x, a product over two contracting dimensions 7.5x, A^T B 4.8x slower than the
//   same work as a 2-D product.
//   The tiled product also reads its lhs as [batch..., K, M] (contracting first): it reads
//   lhs elements one at a time, so their layout costs nothing there, and the gradient of
//   x @ w with respect to w, dot(g, x) over the batch, needs no transpose. Where the
//   operands need transposes either way, the product is computed transposed, as
//   (rhs^T lhs^T)^T, if that moves fewer elements (its result's transpose counted unless
//   every reader transposes it back); where neither way moves anything, so as to have more
//   than a few rows to share among threads. Transposes read only by a dot are first folded
//   into its dimension numbers (XLA's TransposeFolding): `a.T @ b` reads a where it lies.
//   A classifier's training step (64-256-6, batch 4096) spent a third of its time in
//   transposes; without them it took 1.9x less time.
//   On a CPU with vector lanes, a tiled product whose N is not a whole number of vectors
//   (below the lanes: not a power of two) gets its rhs padded with zero columns to one and
//   its result sliced back: the columns past the last whole vector were computed an
//   element at a time (an RL policy's 6 logits from 64 features took 4.9x, 24 of them 5.7x
//   as long as the padded product); and to a whole tile span where that wastes fewer
//   columns than the span leaves over. Not a small product (under 2^15 multiply-adds, a
//   step of a loop over a few environments), where the two more kernels cost more.
// - A matrix-vector product (N = 1) is a row reduction of the lhs rows times the vector:
//   vectorised along the contiguous row and split across threads where long (a value head
//   [65536, 64] @ [64, 1] took 3.1 ms as a dot, one lane of work per row).
// - A vector-matrix product (M = 1) is a column reduction of the rhs rows times the
//   vector's elements (a tiled product of one row packed all of the rhs first: 5x as long
//   for [1024] @ [1024, 1024]).
// - An outer product (K = 1, or no contracting dimensions) is an elementwise product of
//   broadcasts, which fuses with its producers and consumers.
// A tiled product sums over the contracting dimensions in the order they pair up (the first
// one outermost) with fused multiply-adds, so a row's result does not depend on the rows
// and columns beside it; the reductions of the matrix-vector forms multiply, then sum in
// the reductions' own fixed order (vectorised; split into blocks by shape alone, see
// tree_reduction.h). Either way the bits depend on shapes only, never on the thread count.
#pragma once

#include "passes/pass.h"

namespace fj {

class DotLayoutPass : public Pass {
 public:
  // `lanes`: the target's vector lanes (Target::vector_lanes; 1 on the GPU: no padding).
  explicit DotLayoutPass(int lanes = 1) : lanes_(lanes) {}
  std::string_view name() const override { return "dot-layout"; }
  bool Run(Module& module) override;

 private:
  int lanes_;
};

}  // namespace fj
