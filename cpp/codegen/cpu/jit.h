// The process-wide ORC LLJIT and the optimisation pipeline for the host CPU.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "llvm/ADT/SmallVector.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Target/TargetMachine.h"

namespace fj::cpu {

class JitEngine {
 public:
  static JitEngine& Get();

  // Optimises `module` at `opt_level` for the host, generates machine code at the matching
  // level (0: LLVM's fast instruction selection; 2, 3: its aggressive level), then adds it to
  // the JIT in a dylib of its own. Returns the address of `symbol` and an owner whose
  // destruction frees the code. `ir_out`, if given, receives the optimised IR; `asm_out`
  // the assembly of the code added.
  //
  // A large module is compiled in parts, each on a thread of its own (SplitIntoParts): the
  // parts depend only on the module, never on the number of threads, so the code is the
  // same however many compile it. `ir_out` and `asm_out` then hold the parts' texts in turn.
  std::pair<void*, std::shared_ptr<void>> Add(std::unique_ptr<llvm::Module> module,
                                              std::unique_ptr<llvm::LLVMContext> context,
                                              const std::string& symbol, int opt_level,
                                              std::string* ir_out, std::string* asm_out = nullptr);
  llvm::TargetMachine& target_machine() { return *target_machine_; }
  // The address of `symbol` in the code `owner` (returned by Add) holds.
  void* Lookup(const std::shared_ptr<void>& owner, const std::string& symbol);

 private:
  // One thread's target machines. A target machine is not safe to use from two threads at
  // once (it caches its subtargets unlocked), so each compiling thread takes a set of its own.
  struct Machines {
    std::unique_ptr<llvm::TargetMachine> optimizer;  // the optimiser's cost queries
    // One per optimisation level 0..3, made on first use: LLVM's codegen level is a property
    // of the target machine.
    std::array<std::unique_ptr<llvm::TargetMachine>, 4> codegen;
  };
  // What one part of a module compiles to.
  struct Compiled {
    llvm::SmallVector<char, 0> object;
    std::string ir, assembly;  // when asked for
  };

  JitEngine();
  std::unique_ptr<Machines> TakeMachines();
  void ReturnMachines(std::unique_ptr<Machines> machines);
  // Optimises and generates `module` with `machines`.
  Compiled CompileModule(llvm::Module& module, int opt_level, bool want_ir, bool want_asm, Machines& machines);
  void Optimize(llvm::Module& module, int opt_level, llvm::TargetMachine& optimizer);
  // Machine code (an object file, or assembly text) for `module`, generated at `opt_level`.
  llvm::SmallVector<char, 0> Generate(llvm::Module& module, int opt_level, bool assembly, Machines& machines);
  // Compiles each part (bitcode) on threads of the process's pool size, results in order.
  std::vector<Compiled> CompileParts(const std::vector<llvm::SmallVector<char, 0>>& parts, int opt_level,
                                     bool want_ir, bool want_asm);

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  // For the emitters' queries and the data layout; compiling threads use Machines of their own.
  std::unique_ptr<llvm::TargetMachine> target_machine_;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> machine_builder_;
  std::mutex machines_mu_;
  std::vector<std::unique_ptr<Machines>> idle_machines_;  // under machines_mu_
  std::mutex mu_;
  // Held shared by every Add for its whole LLVM work (optimisation included, which runs
  // outside mu_ and takes LLVM's own global locks); a fork takes it exclusively, so the
  // child never inherits a lock a compiling thread held.
  std::shared_mutex working_;
  uint64_t next_dylib_ = 0;
};

}  // namespace fj::cpu
