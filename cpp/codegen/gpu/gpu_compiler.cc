// GPU program generation (see gpu_compiler.h).
#include "codegen/gpu/gpu_compiler.h"

#include <unordered_map>

#include "codegen/cpu/jit.h"
#include "codegen/gpu/gpu_kernel.h"
#include "codegen/gpu/nvptx.h"
#include "codegen/program_emitter.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj::gpu {
namespace {

using codegen::Builder;

// Fields of FjGpuRuntimeApi, in order.
enum ApiField { kLaunch = 0, kCopy, kRead, kHostCall, kContext, kDeviceTemp, kConstants };

// The kernels of a program, emitted in the forms the backend needs.
struct KernelModules {
  // The NVVM form, for PTX.
  std::unique_ptr<llvm::LLVMContext> nvvm_context;
  std::unique_ptr<llvm::Module> nvvm;
  std::unique_ptr<codegen::GpuIntrinsics> nvvm_intrinsics = codegen::MakeNvvmIntrinsics();
  // The emulation's form: in the host program's module.
  std::unique_ptr<codegen::GpuIntrinsics> emulated_intrinsics = codegen::MakeEmulatedIntrinsics();
  std::vector<std::string> names;
  std::vector<llvm::Function*> host_kernels;  // their host wrappers (void(ptr args))
};

class GpuProgramEmitter : public codegen::ProgramEmitter {
 public:
  GpuProgramEmitter(llvm::Module& host, const BufferAssignment& buffers, const GpuOptions& options,
                    KernelModules& kernels, GpuProgram& program)
      : ProgramEmitter(host, buffers), options_(options), kernels_(kernels), program_(program) {}

 private:
  llvm::Value* Api(ApiField field) { return LoadPointer(fn_->getArg(3), field); }

  void CallApi(ApiField field, llvm::Type* ret, std::vector<llvm::Type*> types, std::vector<llvm::Value*> args) {
    types.insert(types.begin(), ptr_);
    args.insert(args.begin(), Api(kContext));
    b_->CreateCall(llvm::FunctionType::get(ret, types, false), Api(field), args);
  }

  KernelInfo EmitKernelCall(const Instruction* fusion, int number) override {
    bool in_place = buffers_.WritesInPlace(fusion);
    const std::string& custom = fusion->attrs().custom_call_target;
    std::string name = "kernel_" + std::to_string(number) + "_" + Sanitized(fusion->name());
    // Kernels that compute alike are one kernel of the module, launched from each place.
    auto [found, added] = generated_.try_emplace(codegen::KernelKey(fusion, in_place));
    Generated& g = found->second;
    if (added) {
      codegen::GpuKernel k;
      if (options_.want_ptx || !options_.emulated) {
        k = codegen::EmitGpuKernel(*kernels_.nvvm, fusion, name, in_place, *kernels_.nvvm_intrinsics);
      }
      if (options_.emulated) {
        k = codegen::EmitGpuKernel(module_, fusion, name, in_place, *kernels_.emulated_intrinsics);
        kernels_.host_kernels.push_back(HostWrapper(k.function, k.spec.num_buffers));
      }
      kernels_.names.push_back(name);
      g = {static_cast<int>(program_.code.kernels.size()), k.plan.units, k.spec.threads_per_unit};
      program_.code.kernels.push_back(k.spec);
    }
    int index = g.index;

    KernelInfo info = Describe(fusion, name, custom.empty() ? std::string(FusionKindName(fusion->fusion_kind())) : "custom-call");
    info.units = g.units;
    info.parallel = true;
    info.threads_per_unit = g.threads_per_unit;
    if (g.units == 0) return info;
    int num_outputs = fusion->shape().IsTuple() ? static_cast<int>(fusion->shape().tuple_shapes().size()) : 1;
    llvm::Value* table = BufferTable(fusion, num_outputs);
    CallApi(kLaunch, b_->getVoidTy(), {b_->getInt64Ty(), ptr_, b_->getInt64Ty()},
            {b_->getInt64(index), table, b_->getInt64(g.units)});
    return info;
  }

  KernelInfo EmitCustomCall(const Instruction* call, int /*number*/) override {
    const std::string& target = call->attrs().custom_call_target;
    if (HasSideEffects(call)) {
      ThrowUnimplemented("host callbacks (fusionjit.debug.print, debug.callback) run on the CPU backend only, "
                         "not yet on the GPU");
    }
    FjKernelFn fn = options_.resolve_custom_call ? options_.resolve_custom_call(target) : nullptr;
    if (!fn) ThrowUnimplemented("unknown custom-call target '", target, "'");
    const Shape& shape = call->shape();
    int num_outputs = shape.IsTuple() ? static_cast<int>(shape.tuple_shapes().size()) : 1;
    int64_t units = shape.IsTuple() ? shape.tuple_shape(0).NumElements() : shape.NumElements();
    KernelInfo info = Describe(call, "host-call." + target, "custom-call (host)");
    info.units = units;
    if (units == 0) return info;
    HostCustomCall host;
    host.target = target;
    host.fn = fn;
    host.num_outputs = num_outputs;
    for (int k = 0; k < num_outputs; ++k) host.buffer_bytes.push_back(shape.IsTuple() ? shape.tuple_shape(k).ByteSize() : shape.ByteSize());
    for (const Instruction* op : call->operands()) host.buffer_bytes.push_back(op->shape().ByteSize());
    int64_t index = static_cast<int64_t>(program_.host_calls.size());
    program_.host_calls.push_back(std::move(host));
    llvm::Value* table = BufferTable(call, num_outputs);
    CallApi(kHostCall, b_->getVoidTy(), {b_->getInt64Ty(), ptr_, b_->getInt64Ty()},
            {b_->getInt64(index), table, b_->getInt64(units)});
    return info;
  }

  llvm::Value* SlicePointer(const BufferSlice& s) override {
    switch (s.kind) {
      case BufferKind::kTemp: return b_->CreateConstGEP1_64(b_->getInt8Ty(), Api(kDeviceTemp), s.offset);
      case BufferKind::kConstant: {
        auto [it, added] = constants_.try_emplace(s.constant, static_cast<int64_t>(program_.constants.size()));
        if (added) {
          const Literal& lit = s.constant->literal();
          const auto* bytes = static_cast<const uint8_t*>(lit.data());
          program_.constants.emplace_back(bytes, bytes + lit.byte_size());
        }
        return LoadPointer(Api(kConstants), it->second);
      }
      default: return ProgramEmitter::SlicePointer(s);
    }
  }

  void EmitCopy(llvm::Value* dst, llvm::Value* src, int64_t bytes) override {
    CallApi(kCopy, b_->getVoidTy(), {ptr_, ptr_, b_->getInt64Ty()}, {dst, src, b_->getInt64(bytes)});
  }

  llvm::Value* ReadScalar(llvm::Type* type, llvm::Value* ptr) override {
    llvm::IRBuilderBase::InsertPoint ip = b_->saveIP();
    b_->SetInsertPoint(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    llvm::Value* slot = b_->CreateAlloca(type);
    b_->restoreIP(ip);
    int64_t bytes = static_cast<int64_t>(module_.getDataLayout().getTypeStoreSize(type));
    CallApi(kRead, b_->getVoidTy(), {ptr_, ptr_, b_->getInt64Ty()}, {slot, ptr, b_->getInt64(bytes ? bytes : 1)});
    return b_->CreateLoad(type, slot);
  }

  int64_t CounterOffset(const BufferAssignment::LoopPlan&, int n) override { return 8 * static_cast<int64_t>(n); }

  // void name.host(ptr args): calls the emulated kernel with *args[i] as argument i.
  llvm::Function* HostWrapper(llvm::Function* kernel, int num_buffers) {
    auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr_}, false);
    llvm::Function* fn = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                                kernel->getName() + ".host", module_);
    Builder b(llvm::BasicBlock::Create(ctx_, "entry", fn));
    std::vector<llvm::Value*> args;
    for (int i = 0; i < num_buffers; ++i) {
      llvm::Value* slot = b.CreateLoad(ptr_, b.CreateConstGEP1_64(ptr_, fn->getArg(0), i));
      args.push_back(b.CreateLoad(ptr_, slot));
    }
    b.CreateCall(kernel, args);
    b.CreateRetVoid();
    return fn;
  }

  static std::string Sanitized(const std::string& name) {
    std::string out = name;
    for (char& c : out) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    }
    return out;
  }

  const GpuOptions& options_;
  KernelModules& kernels_;
  GpuProgram& program_;
  std::unordered_map<const Instruction*, int64_t> constants_;
  struct Generated {
    int index;  // in the module's kernels
    int64_t units;
    int threads_per_unit;
  };
  std::unordered_map<std::string, Generated> generated_;  // by codegen::KernelKey
};

}  // namespace

std::string MaxGpuArch() { return codegen::LlvmMaxArch(); }
std::string FindLibdevicePath() { return codegen::FindLibdevice(); }

GpuCompiled CompileGpuProgram(const Module& module, const BufferAssignment& buffers, const GpuOptions& options) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto host = std::make_unique<llvm::Module>(module.name() + ".host", *context);
  host->setDataLayout(cpu::JitEngine::Get().target_machine().createDataLayout());
  KernelModules kernels;
  kernels.nvvm_context = std::make_unique<llvm::LLVMContext>();
  kernels.nvvm = std::make_unique<llvm::Module>(module.name() + ".gpu", *kernels.nvvm_context);
  GpuCompiled out;
  GpuProgramEmitter emitter(*host, buffers, options, kernels, out.program);
  out.kernels = emitter.Emit(*module.entry());
  out.loops = emitter.loops();

  if (options.want_ptx || !options.emulated) {
    codegen::PtxOptions ptx;
    ptx.arch = options.arch;
    ptx.ptx_version = options.ptx_version;
    ptx.opt_level = options.opt_level;
    codegen::PtxResult r = codegen::CompileToPtx(*kernels.nvvm, kernels.names, ptx, options.keep_llvm_ir);
    out.ptx = r.ptx;
    out.program.code.ptx = r.ptx;
    out.llvm_ir = r.optimized_ir;
  }
  // The emulation's kernels, by their host wrappers, in a table the program's code holds.
  llvm::Type* ptr = llvm::PointerType::getUnqual(*context);
  std::vector<llvm::Constant*> entries(kernels.host_kernels.begin(), kernels.host_kernels.end());
  auto* table_type = llvm::ArrayType::get(ptr, entries.size());
  new llvm::GlobalVariable(*host, table_type, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(table_type, entries), "fj_host_kernels");
  bool want_ir = options.keep_llvm_ir || GetDebugFlags().debug_level >= 3;
  std::string host_ir;
  auto [entry, code] = cpu::JitEngine::Get().Add(std::move(host), std::move(context), "fj_main", 2,
                                                 want_ir ? &host_ir : nullptr);
  out.program.entry = reinterpret_cast<FjGpuEntryFn>(entry);
  out.program.host_code = code;
  if (options.emulated) {
    auto* table = static_cast<HostKernelFn*>(cpu::JitEngine::Get().Lookup(code, "fj_host_kernels"));
    out.program.code.host_kernels.assign(table, table + kernels.host_kernels.size());
    out.program.code.host_code = code;
  }
  if (want_ir) out.llvm_ir += "\n; ---- the host program ----\n" + host_ir;
  return out;
}

}  // namespace fj::gpu
