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

namespace fj {

class TreeReductionPass : public Pass {
 public:
  // Only reductions of at least 2 * kBlockElements elements are split, into blocks of at
  // least kBlockElements elements (over all outputs) and kMinBlockRows reduced elements
  // per output, at most kMaxBlocks of them.
  static constexpr int64_t kBlockElements = 32768;
  static constexpr int64_t kMinBlockRows = 8;
  static constexpr int64_t kMaxBlocks = 64;
  // A reduction that already has this many parallel units is left alone: a row of a row
  // reduction is a unit, and a vector of kColumnGroup outputs of a column reduction.
  static constexpr int64_t kEnoughUnits = 32;
  static constexpr int64_t kColumnGroup = 64;

  std::string_view name() const override { return "tree-reduction"; }
  bool Run(Module& module) override;
};

}  // namespace fj
