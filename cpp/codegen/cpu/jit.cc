// The LLJIT engine (see jit.h). LLVM errors become fj::Error; nothing here aborts.
#include "codegen/cpu/jit.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <new>
#include <sstream>
#include <thread>
#include <unordered_set>
#include <vector>

#include "codegen/cpu/cpu_compiler.h"
#include "runtime/thread_pool.h"

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
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
#include "support/flags.h"

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
  machine_builder_ = std::make_unique<llvm::orc::JITTargetMachineBuilder>(jtmb);
  // Code is added as object files Generate() made, so the JIT's own compiler is unused.
  jit_ = Unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
                "creating the JIT");
}

std::unique_ptr<JitEngine::Machines> JitEngine::TakeMachines() {
  {
    std::lock_guard<std::mutex> lock(machines_mu_);
    if (!idle_machines_.empty()) {
      std::unique_ptr<Machines> m = std::move(idle_machines_.back());
      idle_machines_.pop_back();
      return m;
    }
  }
  auto m = std::make_unique<Machines>();
  m->optimizer = Unwrap(machine_builder_->createTargetMachine(), "creating the target machine");
  return m;
}

void JitEngine::ReturnMachines(std::unique_ptr<Machines> machines) {
  std::lock_guard<std::mutex> lock(machines_mu_);
  idle_machines_.push_back(std::move(machines));
}

llvm::SmallVector<char, 0> JitEngine::Generate(llvm::Module& module, int opt_level, bool assembly,
                                               Machines& machines) {
  int level = std::clamp(opt_level, 0, 3);
  std::unique_ptr<llvm::TargetMachine>& tm = machines.codegen[level];
  if (!tm) {
    llvm::orc::JITTargetMachineBuilder b = *machine_builder_;
    // 0: fast instruction selection, for compile speed (the fuzzer's reference profile);
    // 2 (the default) and 3: the aggressive level all code used before levels were split.
    b.setCodeGenOptLevel(level == 0   ? llvm::CodeGenOptLevel::None
                         : level == 1 ? llvm::CodeGenOptLevel::Less
                                      : llvm::CodeGenOptLevel::Aggressive);
    tm = Unwrap(b.createTargetMachine(), "creating the target machine");
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr,
                              assembly ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile)) {
    ThrowInternal("the target cannot emit ", assembly ? "assembly" : "an object file");
  }
  pm.run(module);
  return buffer;
}

void JitEngine::Optimize(llvm::Module& module, int opt_level, llvm::TargetMachine& optimizer) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&optimizer);
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

JitEngine::Compiled JitEngine::CompileModule(llvm::Module& module, int opt_level, bool want_ir, bool want_asm,
                                             Machines& machines) {
  Compiled out;
  Optimize(module, opt_level, *machines.optimizer);
  if (want_ir) {
    llvm::raw_string_ostream os(out.ir);
    module.print(os, nullptr);
  }
  if (want_asm) {
    // The assembly of a copy (code generation changes the module), as the code added.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
    llvm::SmallVector<char, 0> text = Generate(*copy, opt_level, /*assembly=*/true, machines);
    out.assembly.assign(text.begin(), text.end());
  }
  out.object = Generate(module, opt_level, /*assembly=*/false, machines);
  return out;
}

namespace {

// A module of fewer instructions than this is compiled whole, on the calling thread; a
// larger one in parts of at least this many. A part costs its own context, bitcode round
// trip, pass pipeline and object file. An MLP's training step with Adam (34 kernels, about
// 9,000 instructions) compiled in 0.52 s on two threads against 0.79 s whole (medians of 8);
// split by 2,000 it took 0.74 s (of 4, a noisy machine); in parts on one thread, 3% longer
// than whole.
constexpr size_t kPartInstructions = 4000;

size_t InstructionCount(const llvm::GlobalValue& g) {
  const auto* f = llvm::dyn_cast<llvm::Function>(&g);
  if (!f) return 1;
  size_t n = 0;
  for (const llvm::BasicBlock& b : *f) n += b.size();
  return n;
}

// The definitions of local linkage (kernel bodies, math helpers, constants) that `root`
// uses, directly or through one another, added to `reached`.
void AddLocalsUsedBy(const llvm::GlobalValue& root, std::unordered_set<const llvm::GlobalValue*>& reached) {
  std::vector<const llvm::Value*> work{&root};
  std::unordered_set<const llvm::Value*> seen{&root};
  auto visit = [&](const llvm::Value* v) {
    if (!llvm::isa<llvm::Constant>(v) || !seen.insert(v).second) return;
    const auto* g = llvm::dyn_cast<llvm::GlobalValue>(v);
    if (g) {
      if (!g->hasLocalLinkage() || g->isDeclaration()) return;
      reached.insert(g);
    }
    work.push_back(v);
  };
  while (!work.empty()) {
    const llvm::Value* v = work.back();
    work.pop_back();
    if (const auto* f = llvm::dyn_cast<llvm::Function>(v)) {
      for (const llvm::BasicBlock& b : *f) {
        for (const llvm::Instruction& i : b) {
          for (const llvm::Value* op : i.operands()) visit(op);
        }
      }
    } else if (const auto* g = llvm::dyn_cast<llvm::GlobalVariable>(v)) {
      if (g->hasInitializer()) visit(g->getInitializer());
    } else if (const auto* c = llvm::dyn_cast<llvm::Constant>(v); c && !llvm::isa<llvm::GlobalValue>(c)) {
      for (const llvm::Value* op : c->operands()) visit(op);
    }
  }
}

// The module in parts, as bitcode, each to be compiled in a context of its own; none when
// it is small enough to compile whole. Each part defines some of the module's external
// definitions (kernels, the program's entry), in the module's order, grouped until the part
// has kPartInstructions; the local definitions they use are copied into every part that
// uses them (they are internal: the copies cannot clash), and the rest are declarations the
// JIT links. Everything here follows from the module alone, never from the thread count.
std::vector<llvm::SmallVector<char, 0>> SplitIntoParts(const llvm::Module& module) {
  // A local variable the code writes would be copied into each part that uses it, and the
  // parts would no longer share it: such a module is compiled whole. (Fusionjit emits only
  // constants; this keeps it so if that changes.)
  for (const llvm::GlobalVariable& g : module.globals()) {
    if (g.hasLocalLinkage() && !g.isConstant()) return {};
  }
  std::vector<std::vector<const llvm::GlobalValue*>> groups;
  std::vector<std::unordered_set<const llvm::GlobalValue*>> locals;
  size_t in_group = kPartInstructions;
  auto add_root = [&](const llvm::GlobalValue& g) {
    if (g.isDeclaration() || g.hasLocalLinkage()) return;
    if (in_group >= kPartInstructions) {
      groups.emplace_back();
      locals.emplace_back();
      in_group = 0;
    }
    groups.back().push_back(&g);
    std::unordered_set<const llvm::GlobalValue*> used;
    AddLocalsUsedBy(g, used);
    size_t n = InstructionCount(g);
    for (const llvm::GlobalValue* l : used) {
      if (locals.back().insert(l).second) n += InstructionCount(*l);
    }
    in_group += n;
  };
  for (const llvm::Function& f : module) add_root(f);
  for (const llvm::GlobalVariable& g : module.globals()) add_root(g);
  if (groups.size() < 2) return {};
  std::vector<llvm::SmallVector<char, 0>> parts;
  for (size_t p = 0; p < groups.size(); ++p) {
    std::unordered_set<const llvm::GlobalValue*> defined(groups[p].begin(), groups[p].end());
    defined.insert(locals[p].begin(), locals[p].end());
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> part =
        llvm::CloneModule(module, map, [&](const llvm::GlobalValue* g) { return defined.count(g) > 0; });
    part->setModuleIdentifier(module.getModuleIdentifier() + ".part" + std::to_string(p));
    llvm::SmallVector<char, 0> bitcode;
    llvm::raw_svector_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*part, os);
    parts.push_back(std::move(bitcode));
  }
  return parts;
}

}  // namespace

std::vector<JitEngine::Compiled> JitEngine::CompileParts(const std::vector<llvm::SmallVector<char, 0>>& parts,
                                                         int opt_level, bool want_ir, bool want_asm) {
  std::vector<Compiled> out(parts.size());
  std::vector<std::exception_ptr> errors(parts.size());
  // The largest first: no thread is left with a large part when the others are done.
  std::vector<size_t> order(parts.size());
  for (size_t p = 0; p < order.size(); ++p) order[p] = p;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return parts[a].size() > parts[b].size(); });
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::unique_ptr<Machines> machines;
    for (size_t k; (k = next.fetch_add(1)) < parts.size();) {
      const size_t p = order[k];
      try {
        if (!machines) machines = TakeMachines();
        llvm::LLVMContext context;
        llvm::MemoryBufferRef buffer(llvm::StringRef(parts[p].data(), parts[p].size()), "part");
        std::unique_ptr<llvm::Module> module = Unwrap(llvm::parseBitcodeFile(buffer, context), "reading a module's part");
        auto t0 = std::chrono::steady_clock::now();
        size_t n = 0;
        for (auto& f : *module) n += f.getInstructionCount();
        out[p] = CompileModule(*module, opt_level, want_ir, want_asm, *machines);
        if (GetDebugFlags().debug_level >= 1) {
          std::fprintf(stderr, "[fusionjit] part %zu: %zu instructions, %.1f ms\n", p, n,
                       std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
      } catch (...) {
        errors[p] = std::current_exception();
      }
    }
    if (machines) ReturnMachines(std::move(machines));
  };
  size_t threads = std::min<size_t>(parts.size(), static_cast<size_t>(ThreadPool::Global().num_threads()));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
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
  std::vector<Compiled> compiled;
  std::vector<llvm::SmallVector<char, 0>> parts = SplitIntoParts(*module);
  const std::string name = module->getModuleIdentifier();
  if (parts.empty()) {
    std::unique_ptr<Machines> machines = TakeMachines();
    compiled.push_back(CompileModule(*module, opt_level, ir_out != nullptr, asm_out != nullptr, *machines));
    ReturnMachines(std::move(machines));
  } else {
    module.reset();
    context.reset();
    compiled = CompileParts(parts, opt_level, ir_out != nullptr, asm_out != nullptr);
  }
  module.reset();
  context.reset();
  for (Compiled& c : compiled) {
    if (ir_out) *ir_out += c.ir;
    if (asm_out) *asm_out += c.assembly;
  }

  std::lock_guard<std::mutex> lock(mu_);
  llvm::orc::ExecutionSession& es = jit_->getExecutionSession();
  std::string dylib_name = "fj_program_" + std::to_string(next_dylib_++);
  llvm::orc::JITDylib& dylib = UnwrapRef(es.createJITDylib(dylib_name), "creating a JIT dylib");
  // Math fallbacks (sinf, pow, ...) resolve against the process, i.e. libm.
  auto generator = Unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                              jit_->getDataLayout().getGlobalPrefix()),
                          "linking the process symbols");
  dylib.addGenerator(std::move(generator));
  for (size_t p = 0; p < compiled.size(); ++p) {
    auto object = std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(compiled[p].object),
                                                                  name + ".part" + std::to_string(p),
                                                                  /*RequiresNullTerminator=*/false);
    if (llvm::Error e = jit_->addObjectFile(dylib, std::move(object))) {
      ThrowInternal("adding a module to the JIT: ", ErrorText(std::move(e)));
    }
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
