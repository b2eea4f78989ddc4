// Slice-of-concatenate forwarding (see concat_forwarding.h).
#include "passes/concat_forwarding.h"

#include "ir/builder.h"

namespace fj {

bool SliceOfConcatForwardingPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.computations()) {
    if (c->IsFusionComputation()) continue;
    for (Instruction* slice : c->MakePostOrder()) {
      if (slice->opcode() != Opcode::kSlice) continue;
      Instruction* concat = slice->operand(0);
      if (concat->opcode() != Opcode::kConcatenate) continue;
      int64_t d = concat->dimensions()[0];
      const SliceConfig& s = slice->attrs().slice;
      int64_t first = s.starts[d];
      int64_t count = slice->shape().dim(d);
      if (count == 0) continue;
      int64_t last = first + (count - 1) * s.strides[d];
      int64_t offset = 0;
      for (Instruction* op : concat->operands()) {
        int64_t size = op->shape().dim(d);
        if (first >= offset && last < offset + size) {
          InstructionAttrs a;
          a.slice = s;
          a.slice.starts[d] = first - offset;
          a.slice.limits[d] = s.limits[d] - offset;
          if (a.slice.limits[d] > size) a.slice.limits[d] = last - offset + 1;
          Instruction* forwarded = Builder(c).Add(Opcode::kSlice, {op}, a, {}, nullptr, slice->name());
          forwarded->set_metadata(slice->metadata());
          slice->ReplaceAllUsesWith(forwarded);
          c->RemoveInstruction(slice);
          changed = true;
          break;
        }
        offset += size;
      }
    }
  }
  return changed;
}

}  // namespace fj
