// The LLJIT engine (see jit.h). LLVM errors become fj::Error; nothing here aborts.
#include "codegen/cpu/jit.h"

#include <pthread.h>

#include <algorithm>
#include <new>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "codegen/cpu/cpu_compiler.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/SmallVectorMemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "support/error.h"

namespace fj::cpu {
namespace {

std::string ErrorText(llvm::Error e) { return llvm::toString(std::move(e)); }

template <typename T>
T Unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) ThrowInternal(what, ": ", ErrorText(v.takeError()));
  return std::move(*v);
}

llvm::orc::JITDylib& UnwrapRef(llvm::Expected<llvm::orc::JITDylib&> v, const char* what) {
  if (!v) ThrowInternal(what, ": ", ErrorText(v.takeError()));
  return *v;
}

// LLVM reports what it cannot handle (e.g. an instruction it cannot select) through
// report_fatal_error, which would abort the interpreter. Our IR is verified before codegen,
// so this should not happen; if it does, it becomes an exception. LLVM is built without
// exceptions but with unwind tables, so the exception unwinds through it, leaking whatever
// it held: the message says to restart.
void OnLlvmFatalError(void*, const char* reason, bool) {
  ThrowInternal("LLVM failed: ", reason, " (fusionjit's JIT may be unusable now: restart the process)");
}

// Options fusionjit gives LLVM's command-line parser before FJ_LLVM_OPTIONS's: X86's
// domain reassignment (chains of scalar bit operations moved into mask registers) took 16%
// of LLVM's time on a scan unrolled 32 times (benchmarks/compile_time.py: 5.4 s -> 4.5 s),
// and changed no kernel's time we measured (CartPole's steps, matrix products).
constexpr const char* kLlvmOptions = "-disable-x86-domain-reassignment";

// FJ_LLVM_OPTIONS="-disable-lsr -x86-..." passes more options to LLVM's command-line parser
// once, as llc would take them (XLA's xla_backend_extra_options): for experiments with
// LLVM's passes without rebuilding. An option LLVM does not know is an error.
void ApplyLlvmOptions() {
  static bool parsed = false;
  static std::string failed;  // the parser's complaint, raised again at every call
  static std::vector<std::string> words;  // kept: LLVM may keep pointers into them
  if (!failed.empty()) ThrowInvalidArgument("FJ_LLVM_OPTIONS: ", failed);
  if (parsed) return;
  parsed = true;
  std::string text = kLlvmOptions;
  if (const char* extra = std::getenv("FJ_LLVM_OPTIONS")) text += std::string(" ") + extra;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<const char*> argv{"fusionjit"};
  for (const std::string& w : words) argv.push_back(w.c_str());
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &os)) {
    failed = os.str();
    ThrowInvalidArgument("FJ_LLVM_OPTIONS: ", failed);
  }
}

}  // namespace

void InstallLlvmErrorHandler() {
  static std::once_flag once;
  std::call_once(once, [] { llvm::install_fatal_error_handler(&OnLlvmFatalError, nullptr); });
}

void RaiseLlvmFatalErrorForTesting(const std::string& message) {
  InstallLlvmErrorHandler();
  llvm::report_fatal_error(llvm::StringRef(message), false);
}

JitEngine& JitEngine::Get() {
  // Lives as long as the process. A fork waits until no thread is compiling or adding code,
  // so the child's JIT (and LLVM's global state) is consistent and unlocked.
  static JitEngine* engine = [] {
    auto* e = new JitEngine();
    pthread_atfork(
        [] {
          Get().working_.lock();
          Get().mu_.lock();
        },
        [] {
          Get().mu_.unlock();
          Get().working_.unlock();
        },
        [] {
          // In the child the writer is another thread id, which a rwlock's unlock reads as
          // a reader's: a fresh lock instead (no thread of the parent survives to hold it).
          Get().mu_.unlock();
          new (&Get().working_) std::shared_mutex();
        });
    return e;
  }();
  return *engine;
}

JitEngine::JitEngine() {
  InstallLlvmErrorHandler();
  ApplyLlvmOptions();
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = Unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  target_machine_ = Unwrap(jtmb.createTargetMachine(), "creating the target machine");
  for (int level = 0; level < static_cast<int>(codegen_machines_.size()); ++level) {
    llvm::orc::JITTargetMachineBuilder b = jtmb;
    // 0: fast instruction selection, for compile speed (the fuzzer's reference profile);
    // 2 (the default) and 3: the aggressive level all code used before levels were split.
    b.setCodeGenOptLevel(level == 0   ? llvm::CodeGenOptLevel::None
                         : level == 1 ? llvm::CodeGenOptLevel::Less
                                      : llvm::CodeGenOptLevel::Aggressive);
    codegen_machines_[level] = Unwrap(b.createTargetMachine(), "creating the target machine");
  }
  // Code is added as object files Generate() made, so the JIT's own compiler is unused.
  jit_ = Unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
                "creating the JIT");
}

llvm::SmallVector<char, 0> JitEngine::Generate(llvm::Module& module, int opt_level, bool assembly) {
  llvm::TargetMachine& tm = *codegen_machines_[std::clamp(opt_level, 0, 3)];
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             assembly ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile)) {
    ThrowInternal("the target cannot emit ", assembly ? "assembly" : "an object file");
  }
  pm.run(module);
  return buffer;
}

void JitEngine::Optimize(llvm::Module& module, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(target_machine_.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = opt_level <= 0   ? llvm::OptimizationLevel::O0
                                  : opt_level == 1 ? llvm::OptimizationLevel::O1
                                  : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                   : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

std::pair<void*, std::shared_ptr<void>> JitEngine::Add(std::unique_ptr<llvm::Module> module,
                                                       std::unique_ptr<llvm::LLVMContext> context,
                                                       const std::string& symbol, int opt_level,
                                                       std::string* ir_out, std::string* asm_out) {
  std::shared_lock<std::shared_mutex> working(working_);  // a fork waits for this compile
  // If this throws, the module goes before its context.
  struct ModuleFirst {
    std::unique_ptr<llvm::Module>& module;
    ~ModuleFirst() { module.reset(); }
  } module_first{module};
  module->setDataLayout(target_machine_->createDataLayout());
  module->setTargetTriple(target_machine_->getTargetTriple().str());
  std::string cpu = target_machine_->getTargetCPU().str();
  std::string features = target_machine_->getTargetFeatureString().str();
  for (llvm::Function& f : *module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", cpu);
    f.addFnAttr("target-features", features);
  }
  std::string verify_errors;
  llvm::raw_string_ostream verify_os(verify_errors);
  if (llvm::verifyModule(*module, &verify_os)) {
    ThrowInternal("generated LLVM IR is invalid: ", verify_os.str());
  }
  Optimize(*module, opt_level);
  if (ir_out) {
    llvm::raw_string_ostream os(*ir_out);
    module->print(os, nullptr);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (asm_out) {
    // The assembly of a copy (code generation changes the module), as the code added.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*module);
    llvm::SmallVector<char, 0> text = Generate(*copy, opt_level, /*assembly=*/true);
    asm_out->assign(text.begin(), text.end());
  }
  auto object = std::make_unique<llvm::SmallVectorMemoryBuffer>(
      Generate(*module, opt_level, /*assembly=*/false), module->getModuleIdentifier(),
      /*RequiresNullTerminator=*/false);
  module.reset();
  context.reset();

  llvm::orc::ExecutionSession& es = jit_->getExecutionSession();
  std::string dylib_name = "fj_program_" + std::to_string(next_dylib_++);
  llvm::orc::JITDylib& dylib = UnwrapRef(es.createJITDylib(dylib_name), "creating a JIT dylib");
  // Math fallbacks (sinf, pow, ...) resolve against the process, i.e. libm.
  auto generator = Unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                              jit_->getDataLayout().getGlobalPrefix()),
                          "linking the process symbols");
  dylib.addGenerator(std::move(generator));
  if (llvm::Error e = jit_->addObjectFile(dylib, std::move(object))) {
    ThrowInternal("adding a module to the JIT: ", ErrorText(std::move(e)));
  }
  auto address = jit_->lookup(dylib, symbol);
  if (!address) {
    llvm::Error e = address.takeError();
    std::string text = ErrorText(std::move(e));
    (void)es.removeJITDylib(dylib);
    ThrowInternal("compiling the program: ", text);
  }
  void* entry = address->toPtr<void*>();
  llvm::orc::JITDylib* handle = &dylib;
  // Freeing the code: remove the dylib when the last executable using it is gone.
  std::shared_ptr<void> owner(static_cast<void*>(handle), [this](void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    llvm::consumeError(jit_->getExecutionSession().removeJITDylib(*static_cast<llvm::orc::JITDylib*>(p)));
  });
  return {entry, owner};
}

void* JitEngine::Lookup(const std::shared_ptr<void>& owner, const std::string& symbol) {
  std::lock_guard<std::mutex> lock(mu_);
  auto address = jit_->lookup(*static_cast<llvm::orc::JITDylib*>(owner.get()), symbol);
  if (!address) ThrowInternal("no symbol ", symbol, " in a JIT'd program: ", ErrorText(address.takeError()));
  return address->toPtr<void*>();
}

}  // namespace fj::cpu
