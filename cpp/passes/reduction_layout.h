// Reductions put in the shape the CPU's reduction kernels walk fast (as XLA:GPU's
// ReductionDimensionGrouper and ReductionSplitter do for its kernels). A kernel walks its
// output's last dimension in vectors, so a column reduction to [32, 8, 8] steps 8 lanes,
// one output row at a time, while its rows lie 64 contiguous elements in memory; and a
// reduction over a short minor run and over other dimensions with kept ones between (a
// group norm's statistics of [N, H, W, G, C] over H, W and C) put outputs whose elements
// lie a whole image apart in one vector, gathered lane by lane (19x the time of the same
// sums in the shape below, 8 MiB: benchmarks/reductions.py). Here:
//   - a column reduction whose operand's minor kept dimensions are adjacent is done over
//     the operand with them merged ([32, 1024, 8, 8] over 1 as [32, 1024, 64]) and its
//     result reshaped back;
//   - a reduction over a short minor run and over dimensions further out, with kept ones
//     between, becomes two: first over the outer ones (a column reduction whose rows are
//     the kept and minor elements, read contiguously), then over the minor run of that
//     small result.
// The elements of each output are combined in another order: float sums may differ in the
// last bits, the same on every run and for any number of threads.
#pragma once

#include "passes/pass.h"

namespace fj {

class ReductionLayoutPass : public Pass {
 public:
  // `vector_lanes`: the target's; 1 (the GPU's threads) leaves reductions as they are.
  explicit ReductionLayoutPass(int vector_lanes) : lanes_(vector_lanes) {}
  std::string_view name() const override { return "reduction-layout"; }
  bool Run(Module& module) override;

 private:
  int lanes_;
};

}  // namespace fj
