// Frontend repair of loop carries (the paper's limitation 1, done by the compiler; the
// fusionjit profile only): a loop-carried array that the body only unpacks by slicing its
// leading dimension (x = state[0], ...) and packs again with concatenate/stack
// (np.array([x, ...])) is split into one carry per row, so the paper's concat-packed
// CartPole compiles to the kernels of its hand-refactored no-concat version.
#pragma once

#include <unordered_map>

#include "passes/pass.h"

namespace fj {

// Splits such carries (leading dimension of at most kMaxRows rows; or, read by columns, the
// last dimension: the same state written for one environment and vmapped, [N, 4]): the
// loop's state holds the rows; the body reads them where it read slices of the array
// (slices of the concatenate that rebuilds it are forwarded by simplification) and returns
// the rows of what it computed; the loop's result is packed again after it.
class LoopCarrySplitPass : public Pass {
 public:
  static constexpr int64_t kMaxRows = 16;
  std::string_view name() const override { return "loop-carry-split"; }
  bool Run(Module& module) override;
};

// Moves a slice of the leading dimension into the op that produced its operand, where every
// user of that op is such a slice: slice(select(p, a, b)) -> select(slice(p), slice(a),
// slice(b)), slice(broadcast(x)) -> broadcast(x or slice(x)), slice(reshape) where the
// reshape only splits or merges unit dimensions. After a carry split, the rows of the
// loop's next state then come straight from the rows that computed them.
// Each slice of a producer read by several slices copies the producer, so a graph of
// diamonds sliced again and again (a scan's odd/even rounds) would grow exponentially:
// a computation may grow to twice its size when the pass first saw it (plus kSlack), then
// the pass stops sinking there.
class SliceSinkingPass : public Pass {
 public:
  static constexpr int64_t kSlack = 64;
  std::string_view name() const override { return "slice-sinking"; }
  bool Run(Module& module) override;

 private:
  std::unordered_map<const Computation*, int64_t> limit_;
};

}  // namespace fj
