// Tree reduction (as XLA's TreeReductionRewriter): a reduction of many elements to a scalar
// has one output element, so one thread would do all of its work. It becomes two: partial
// results over up to 64 blocks of the flattened input (a row reduction the thread pool
// shares out), then the reduction of the partials. Blocks depend only on the input size, so
// results do not depend on the number of threads.
#pragma once

#include "passes/pass.h"

namespace fj {

class TreeReductionPass : public Pass {
 public:
  // Reductions of at least 2 * kBlockElements elements are split into blocks of at least
  // kBlockElements.
  static constexpr int64_t kBlockElements = 32768;
  static constexpr int64_t kMaxBlocks = 64;

  std::string_view name() const override { return "tree-reduction"; }
  bool Run(Module& module) override;
};

}  // namespace fj
