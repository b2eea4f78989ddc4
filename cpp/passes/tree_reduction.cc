// Tree reduction (see tree_reduction.h).
#include "passes/tree_reduction.h"

#include <algorithm>

#include "ir/builder.h"

namespace fj {
namespace {

// The reduction seen as [A, R, C] (R the reduced elements), when its reduced dimensions
// are one contiguous run.
struct Split {
  int64_t a = 1, r = 1, c = 1;
};

bool AsContiguousRun(const Instruction* reduce, Split* split) {
  const std::vector<int64_t>& dims = reduce->operand(0)->shape().dims();
  std::vector<int64_t> reduced = reduce->dimensions();
  if (reduced.empty()) return false;
  std::sort(reduced.begin(), reduced.end());
  if (reduced.back() - reduced.front() + 1 != static_cast<int64_t>(reduced.size())) return false;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    int64_t& part = d < reduced.front() ? split->a : d <= reduced.back() ? split->r : split->c;
    part *= dims[d];
  }
  return true;
}

// How many blocks to split into; 1 leaves the reduction as it is.
int64_t BlocksFor(const Split& s, const TreeReductionLimits& limits) {
  int64_t n = s.a * s.r * s.c;
  int64_t units = s.c == 1 ? s.a : s.a * ((s.c + limits.column_group - 1) / limits.column_group);
  if (n < 2 * limits.block_elements || units >= limits.enough_units) return 1;
  int64_t most = std::min({limits.max_blocks, n / limits.block_elements, s.r / limits.min_block_rows});
  // A count that divides the reduced elements needs no padding, whose bounds test in every
  // step of the inner loop costs more than a few blocks fewer do.
  for (int64_t blocks = most; blocks >= std::max<int64_t>(2, most / 2); --blocks) {
    if (s.r % blocks == 0) return blocks;
  }
  return most;
}

}  // namespace

bool TreeReductionPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.computations()) {
    if (c->IsFusionComputation()) continue;
    for (Instruction* reduce : c->MakePostOrder()) {
      if (reduce->opcode() != Opcode::kReduce || reduce->operand_count() != 2 || !reduce->shape().IsArray()) continue;
      Split s;
      if (!AsContiguousRun(reduce, &s)) continue;
      int64_t blocks = BlocksFor(s, limits_);
      if (blocks < 2) continue;
      int64_t per_block = (s.r + blocks - 1) / blocks;
      Instruction* x = reduce->operand(0);
      Instruction* init = reduce->operand(1);
      Builder b(c);
      const std::string& source = reduce->metadata();
      auto tagged = [&](Instruction* i) {
        i->set_metadata(source);
        return i;
      };
      // Dimensions of size 1 are left out: the emitter walks [A, R, C] with R innermost
      // (a row reduction) when there is no C.
      auto without_ones = [](std::vector<int64_t> dims) {
        dims.erase(std::remove(dims.begin(), dims.end(), int64_t{1}), dims.end());
        return dims;
      };
      int64_t r_dim = s.a > 1 ? 1 : 0;
      std::vector<int64_t> flat_dims = without_ones({s.a, s.r, s.c});
      Instruction* flat = x->shape().dims() == flat_dims ? x : tagged(b.Reshape(x, flat_dims));
      if (blocks * per_block != s.r) {
        // The init value is the combiner's identity: padding with it changes nothing.
        InstructionAttrs a;
        a.padding.assign(flat->shape().rank(), PadDim{0, 0, 0});
        a.padding[r_dim] = PadDim{0, blocks * per_block - s.r, 0};
        flat = tagged(b.Add(Opcode::kPad, {flat, init}, a));
      }
      Instruction* blocked = tagged(b.Reshape(flat, without_ones({s.a, blocks, per_block, s.c})));
      Instruction* partial = tagged(b.Reduce(blocked, init, {r_dim + 1}, reduce->to_apply()));
      Instruction* total = tagged(b.Reduce(partial, init, {r_dim}, reduce->to_apply()));
      if (!total->shape().SameDims(reduce->shape())) total = tagged(b.Reshape(total, reduce->shape().dims()));
      reduce->ReplaceAllUsesWith(total);
      c->RemoveInstruction(reduce);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
