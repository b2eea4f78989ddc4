// Custom-call expansion (see custom_call_expansion.h).
#include "passes/custom_call_expansion.h"

#include "ir/builder.h"

namespace fj {
namespace {

// threefry2x32 (Random123's Threefry-2x32, 20 rounds, as JAX and the runtime's kernel
// compute it): operands k0, k1, x0, x1 of one u32 shape; results (y0, y1).
Instruction* Threefry(Builder& b, const std::vector<Instruction*>& p) {
  const std::vector<int64_t>& dims = p[0]->shape().dims();
  auto c = [&](uint32_t v) { return b.Broadcast(b.ScalarConstant(DType::kU32, v), dims, {}); };
  auto add = [&](Instruction* x, Instruction* y) { return b.Binary(Opcode::kAdd, x, y); };
  auto rotl = [&](Instruction* x, int r) {
    return b.Binary(Opcode::kOr, b.Binary(Opcode::kShiftLeft, x, c(static_cast<uint32_t>(r))),
                    b.Binary(Opcode::kShiftRightLogical, x, c(static_cast<uint32_t>(32 - r))));
  };
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  Instruction* ks[3] = {p[0], p[1], b.Binary(Opcode::kXor, b.Binary(Opcode::kXor, p[0], p[1]), c(0x1BD11BDAu))};
  Instruction* x0 = add(p[2], ks[0]);
  Instruction* x1 = add(p[3], ks[1]);
  for (int block = 0; block < 5; ++block) {
    for (int r = 0; r < 4; ++r) {
      x0 = add(x0, x1);
      x1 = b.Binary(Opcode::kXor, rotl(x1, kRot[block % 2][r]), x0);
    }
    x0 = add(x0, ks[(block + 1) % 3]);
    x1 = add(x1, add(ks[(block + 2) % 3], c(static_cast<uint32_t>(block + 1))));
  }
  return b.Tuple({x0, x1});
}

}  // namespace

bool HasIrExpansion(const std::string& target) { return target == "threefry2x32"; }

bool CustomCallExpansionPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* call : c->MakePostOrder()) {
      if (call->opcode() != Opcode::kCustomCall || !HasIrExpansion(call->attrs().custom_call_target)) continue;
      const std::string& target = call->attrs().custom_call_target;
      Computation* fused = module.AddComputation("expanded_" + target);
      Builder fb(fused);
      std::vector<Instruction*> params;
      for (int i = 0; i < call->operand_count(); ++i) {
        params.push_back(fb.Parameter(i, call->operand(i)->shape(), "p" + std::to_string(i)));
      }
      fused->set_root(Threefry(fb, params));
      InstructionAttrs attrs;
      attrs.fusion_kind = FusionKind::kLoop;
      attrs.custom_call_target = target;
      Shape shape = call->shape();
      Instruction* fusion = Builder(c).Add(Opcode::kFusion, call->operands(), attrs, {fused}, &shape, target);
      fusion->set_metadata(call->metadata());
      fused->set_name(module.UniqueComputationName("fused_" + fusion->name()));
      call->ReplaceAllUsesWith(fusion);
      c->RemoveInstruction(call);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
