// NVPTX code generation (see nvptx.h).
#include "codegen/gpu/nvptx.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/Transforms/IPO/Internalize.h"
#include "support/error.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace fj::codegen {
namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

void InitializeNvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

int ArchNumber(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) ThrowInvalidArgument("unknown GPU target '", arch, "' (expected e.g. sm_80)");
  return std::atoi(arch.c_str() + 3);
}

// The C library's math functions the emitters call (math.h: CallLibmPerLane) are libdevice's
// __nv_ functions of the same name.
bool RenameLibmCalls(llvm::Module& module) {
  static const char* const kNames[] = {"sinf", "sin", "cosf", "cos", "tanf", "tan", "powf", "pow",
                                       "fmodf", "fmod", "expf", "exp", "logf", "log", "atan2f", "atan2"};
  bool any = false;
  for (const char* name : kNames) {
    llvm::Function* f = module.getFunction(name);
    if (!f || !f->isDeclaration()) continue;
    f->setName(std::string("__nv_") + name);
    any = true;
  }
  return any;
}

void LinkLibdevice(llvm::Module& module) {
  std::string path = FindLibdevice();
  if (path.empty()) {
    ThrowUnimplemented("this program needs libdevice (the CUDA toolkit's math library, for sin/cos of large "
                       "arguments or float64 powers) and none was found: set FUSIONJIT_LIBDEVICE or CUDA_HOME");
  }
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) ThrowInvalidArgument("cannot read libdevice at ", path);
  auto parsed = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), module.getContext());
  if (!parsed) ThrowInternal("cannot parse libdevice at ", path, ": ", llvm::toString(parsed.takeError()));
  std::unique_ptr<llvm::Module> libdevice = std::move(*parsed);
  libdevice->setTargetTriple(kTriple);
  libdevice->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(libdevice), llvm::Linker::Flags::LinkOnlyNeeded)) {
    ThrowInternal("linking libdevice failed");
  }
}

}  // namespace

std::string LlvmMaxArch() { return "sm_90"; }

int LlvmMaxPtxVersion() {
#if LLVM_VERSION_MAJOR >= 19
  return 85;
#elif LLVM_VERSION_MAJOR == 18
  return 83;
#else
  return 81;
#endif
}

int MinPtxVersion(const std::string& arch) {
  int n = ArchNumber(arch);
  if (n >= 90) return 78;
  if (n >= 89) return 78;
  if (n >= 87) return 74;
  if (n >= 86) return 71;
  return 70;
}

std::string FindLibdevice() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("FUSIONJIT_LIBDEVICE"); p && *p) candidates.push_back(p);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* p = std::getenv(var); p && *p) candidates.push_back(std::string(p) + "/nvvm/libdevice/libdevice.10.bc");
  }
  for (const char* p : {"/usr/local/cuda/nvvm/libdevice/libdevice.10.bc", "/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc",
                        "/usr/lib/cuda/nvvm/libdevice/libdevice.10.bc"}) {
    candidates.push_back(p);
  }
  std::error_code ec;
  for (const std::string& c : candidates) {
    if (std::filesystem::is_regular_file(c, ec)) return c;
  }
  return "";
}

PtxResult CompileToPtx(llvm::Module& module, const std::vector<std::string>& kernels, const PtxOptions& options,
                       bool keep_ir) {
  InitializeNvptx();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (!target) ThrowInternal("LLVM has no NVPTX target: ", error);
  int ptx = options.ptx_version > 0 ? options.ptx_version : MinPtxVersion(options.arch);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      kTriple, options.arch, "+ptx" + std::to_string(ptx), llvm::TargetOptions(), std::nullopt, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) ThrowInternal("cannot create the NVPTX target machine for ", options.arch);
  module.setTargetTriple(kTriple);
  module.setDataLayout(tm->createDataLayout());

  llvm::LLVMContext& ctx = module.getContext();
  llvm::NamedMDNode* annotations = module.getOrInsertNamedMetadata("nvvm.annotations");
  for (const std::string& name : kernels) {
    llvm::Function* f = module.getFunction(name);
    FJ_CHECK(f, "no kernel ", name);
    f->setCallingConv(llvm::CallingConv::PTX_Kernel);
    llvm::Metadata* md[] = {llvm::ValueAsMetadata::get(f), llvm::MDString::get(ctx, "kernel"),
                            llvm::ValueAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1))};
    annotations->addOperand(llvm::MDNode::get(ctx, md));
  }
  // IEEE semantics as the CPU's: no flushing of denormals in libdevice's functions.
  module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", static_cast<uint32_t>(0));
  if (RenameLibmCalls(module)) LinkLibdevice(module);
  // Only the kernels are entry points: the rest (libdevice, bodies) may be inlined away.
  llvm::internalizeModule(module, [&](const llvm::GlobalValue& gv) {
    return std::find(kernels.begin(), kernels.end(), gv.getName().str()) != kernels.end();
  });
  std::string verify_errors;
  llvm::raw_string_ostream verify_os(verify_errors);
  if (llvm::verifyModule(module, &verify_os)) ThrowInternal("generated GPU IR is invalid: ", verify_os.str());

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = options.opt_level <= 1 ? llvm::OptimizationLevel::O1
                                  : options.opt_level == 2 ? llvm::OptimizationLevel::O2
                                                           : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);

  PtxResult result;
  if (keep_ir) {
    llvm::raw_string_ostream os(result.optimized_ir);
    module.print(os, nullptr);
  }
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    ThrowInternal("the NVPTX target cannot emit PTX");
  }
  pm.run(module);
  result.ptx = std::string(buffer.str());
  return result;
}

}  // namespace fj::codegen
