// Reductions in the shape the CPU's kernels walk fast (see reduction_layout.h).
#include "passes/reduction_layout.h"

#include <algorithm>

#include "ir/builder.h"

namespace fj {
namespace {

// The operand's dimensions of more than one element, adjacent ones reduced alike merged:
// `sizes[g]` elements, reduced or kept (`reduced[g]`), made of `dims[g]` of them.
struct Groups {
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
  std::vector<int> dims;
};

Groups GroupsOf(const Instruction* reduce) {
  const std::vector<int64_t>& shape = reduce->operand(0)->shape().dims();
  std::vector<bool> is_reduced(shape.size(), false);
  for (int64_t d : reduce->dimensions()) is_reduced[d] = true;
  Groups g;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!g.sizes.empty() && g.reduced.back() == is_reduced[d]) {
      g.sizes.back() *= shape[d];
      g.dims.back() += 1;
    } else {
      g.sizes.push_back(shape[d]);
      g.reduced.push_back(is_reduced[d]);
      g.dims.push_back(1);
    }
  }
  return g;
}

// The positions of the groups `want` picks.
std::vector<int64_t> Positions(const Groups& g, bool want) {
  std::vector<int64_t> out;
  for (size_t k = 0; k < g.sizes.size(); ++k) {
    if (g.reduced[k] == want) out.push_back(static_cast<int64_t>(k));
  }
  return out;
}

}  // namespace

bool ReductionLayoutPass::Run(Module& module) {
  if (lanes_ <= 1) return false;
  bool changed = false;
  for (Computation* c : module.computations()) {
    if (c->IsFusionComputation()) continue;
    for (Instruction* reduce : c->MakePostOrder()) {
      if (reduce->opcode() != Opcode::kReduce || reduce->operand_count() != 2 || !reduce->shape().IsArray()) continue;
      Groups g = GroupsOf(reduce);
      const int n = static_cast<int>(g.sizes.size());
      if (n < 2) continue;
      // Reduced groups before the last: the outer dimensions a split reduces first.
      int outer_reduced = 0;
      for (int k = 0; k + 1 < n; ++k) outer_reduced += g.reduced[k] ? 1 : 0;
      // A minor run shorter than four vectors: measured, the split pays from there down
      // ([32, 1024, 2, 32] over 1 and 3: 183 us whole, 94 split; 64 elements: 117 and 94;
      // 256: 90 and 111).
      const bool split = g.reduced.back() && g.sizes.back() < 4 * lanes_ && outer_reduced > 0;
      // A column reduction whose minor kept group is several dimensions.
      const bool merge = !g.reduced.back() && g.dims.back() > 1;
      if (!split && !merge) continue;
      Builder b(c);
      const std::string& source = reduce->metadata();
      auto tagged = [&](Instruction* i) {
        i->set_metadata(source);
        return i;
      };
      Instruction* init = reduce->operand(1);
      Instruction* result;
      if (split) {
        // First over the outer reduced groups, of the operand seen with its last kept group
        // and the minor run as one kept row (contiguous in memory), then over the run.
        std::vector<int64_t> rows(g.sizes.begin(), g.sizes.end() - 2);
        rows.push_back(g.sizes[n - 2] * g.sizes[n - 1]);
        Groups outer{rows, std::vector<bool>(g.reduced.begin(), g.reduced.end() - 2), {}};
        outer.reduced.push_back(false);
        Instruction* grouped = tagged(b.Reshape(reduce->operand(0), rows));
        Instruction* partial = tagged(b.Reduce(grouped, init, Positions(outer, true), reduce->to_apply()));
        std::vector<int64_t> runs = partial->shape().dims();
        runs.back() = g.sizes[n - 2];
        runs.push_back(g.sizes[n - 1]);
        Instruction* split_rows = tagged(b.Reshape(partial, runs));
        result = tagged(b.Reduce(split_rows, init, {static_cast<int64_t>(runs.size()) - 1}, reduce->to_apply()));
      } else {
        Instruction* grouped = tagged(b.Reshape(reduce->operand(0), g.sizes));
        result = tagged(b.Reduce(grouped, init, Positions(g, true), reduce->to_apply()));
      }
      if (!result->shape().SameDims(reduce->shape())) result = tagged(b.Reshape(result, reduce->shape().dims()));
      reduce->ReplaceAllUsesWith(result);
      c->RemoveInstruction(reduce);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
