// Tree reduction (as XLA's TreeReductionRewriter): a reduction with few outputs and many
// elements to reduce would give the thread pool too few units of work (a reduction to a
// scalar has one). It becomes two: partial results over blocks of the reduced elements,
// then the reduction of the partials. The reduced dimensions must be one contiguous run;
// with A the elements of the kept dimensions before it and C after it, the input is seen
// as [A, R, C], split into [A, blocks, R / blocks, C], reduced over R / blocks and then
// over the blocks. Blocks depend only on the shape, so results do not depend on the
// number of threads.
#pragma once

#include "passes/pass.h"
#include "support/target.h"

namespace fj {

class TreeReductionPass : public Pass {
 public:
  // Only reductions of at least 2 * block_elements elements are split, into blocks of at
  // least block_elements elements (over all outputs) and min_block_rows reduced elements
  // per output, at most max_blocks of them. A reduction that already has enough_units
  // parallel units is left alone: a row of a row reduction is a unit, and column_group
  // outputs of a column reduction (the target's figures: TreeReductionLimits).
  explicit TreeReductionPass(TreeReductionLimits limits = {}) : limits_(limits) {}
  std::string_view name() const override { return "tree-reduction"; }
  bool Run(Module& module) override;

 private:
  TreeReductionLimits limits_;
};

}  // namespace fj
