// GPU kernel emission (see gpu_kernel.h).
#include "codegen/gpu/gpu_kernel.h"

#include "codegen/whole_loop_emitter.h"
#include "ir/whole_loop.h"
#include "support/target.h"

namespace fj::codegen {
namespace {

// Whether the lanes of a warp take each unit together: the unit's reductions reduce rows
// long enough to share.
bool WarpPerUnit(const Instruction* fusion, const KernelPlan& plan) {
  std::vector<const Instruction*> reductions = CooperativeReductions(fusion, plan);
  if (reductions.empty()) return false;
  const Instruction* r = reductions[0];
  return r->operand(0)->shape().dim(static_cast<int>(r->dimensions().back())) >= kMinWarpRow;
}

}  // namespace

GpuKernel EmitGpuKernel(llvm::Module& module, const Instruction* fusion, const std::string& name, bool in_place,
                        const GpuIntrinsics& intrinsics) {
  llvm::LLVMContext& ctx = module.getContext();
  GpuKernel k;
  k.plan = PlanKernel(fusion, /*max_width=*/1, in_place);
  k.plan.keep_row_values = false;
  bool whole_loop = k.plan.mode == KernelPlan::Mode::kWholeLoop;
  bool warp_lanes = whole_loop && GetWholeLoopLayout(fusion->attrs(), *fusion->fused_computation()).reductions > 0;
  bool warp_units = !whole_loop && WarpPerUnit(fusion, k.plan);

  WarpCooperation warp;
  warp.lanes = kWarpSize;
  warp.lane_id = [&intrinsics](Builder& b) {
    llvm::Value* tid = b.CreateZExt(intrinsics.Read(b, SpecialRegister::kTidX), b.getInt64Ty());
    return b.CreateAnd(tid, b.getInt64(kWarpSize - 1));
  };
  warp.shuffle_xor = [&intrinsics](Builder& b, llvm::Value* v, int mask) { return intrinsics.ShuffleXor(b, v, mask); };
  const WarpCooperation* cooperation = (warp_lanes || warp_units) ? &warp : nullptr;
  llvm::Function* body = whole_loop ? EmitWholeLoopBody(module, fusion, 1, name, cooperation)
                                    : EmitKernelBody(module, fusion, k.plan, name, in_place, cooperation);
  int num_buffers = static_cast<int>(body->arg_size()) - 2;
  int num_outputs = fusion->shape().IsTuple() ? static_cast<int>(fusion->shape().tuple_shapes().size()) : 1;

  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  std::vector<llvm::Type*> params(num_buffers, ptr);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  llvm::Function* fn = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, name, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  for (int i = 0; i < num_buffers; ++i) {
    if (in_place) continue;
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    if (i >= num_outputs) fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  Builder b(llvm::BasicBlock::Create(ctx, "entry", fn));
  auto reg = [&](SpecialRegister r) { return b.CreateZExt(intrinsics.Read(b, r), b.getInt64Ty()); };
  llvm::Value* thread = b.CreateAdd(b.CreateMul(reg(SpecialRegister::kCtaidX), reg(SpecialRegister::kNtidX)),
                                    reg(SpecialRegister::kTidX));
  llvm::Value* threads = b.CreateMul(reg(SpecialRegister::kNctaidX), reg(SpecialRegister::kNtidX));
  // The grid-stride loop: first unit, step and the units each call of the body takes. A
  // warp's loop is the same for all its lanes, so that they meet at every shuffle.
  llvm::Value* first = thread;
  llvm::Value* step = threads;
  int64_t per_call = 1;
  if (warp_units || warp_lanes) {
    first = b.CreateUDiv(thread, b.getInt64(kWarpSize));
    step = b.CreateUDiv(threads, b.getInt64(kWarpSize));
  }
  if (warp_lanes) {
    first = b.CreateMul(first, b.getInt64(kWarpSize));
    step = b.CreateMul(step, b.getInt64(kWarpSize));
    per_call = kWarpSize;
  }
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx, "grid.header", fn);
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx, "grid.body", fn);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, "grid.exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* unit = b.CreatePHI(b.getInt64Ty(), 2, "unit");
  unit->addIncoming(first, pre);
  b.CreateCondBr(b.CreateICmpSLT(unit, b.getInt64(k.plan.units)), loop, exit);
  b.SetInsertPoint(loop);
  std::vector<llvm::Value*> args;
  for (int i = 0; i < num_buffers; ++i) args.push_back(fn->getArg(i));
  args.push_back(unit);
  args.push_back(b.CreateAdd(unit, b.getInt64(per_call)));
  b.CreateCall(body, args);
  unit->addIncoming(b.CreateAdd(unit, step), b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();

  k.function = fn;
  k.spec.name = name;
  k.spec.num_buffers = num_buffers;
  k.spec.threads_per_unit = warp_units ? kWarpSize : 1;
  k.spec.warp_sync = warp_units || warp_lanes;
  return k;
}

}  // namespace fj::codegen
