// The process-wide ORC LLJIT and the optimisation pipeline for the host CPU.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

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
  std::pair<void*, std::shared_ptr<void>> Add(std::unique_ptr<llvm::Module> module,
                                              std::unique_ptr<llvm::LLVMContext> context,
                                              const std::string& symbol, int opt_level,
                                              std::string* ir_out, std::string* asm_out = nullptr);
  llvm::TargetMachine& target_machine() { return *target_machine_; }
  // The address of `symbol` in the code `owner` (returned by Add) holds.
  void* Lookup(const std::shared_ptr<void>& owner, const std::string& symbol);

 private:
  JitEngine();
  void Optimize(llvm::Module& module, int opt_level);
  // Machine code (an object file, or assembly text) for `module`, generated at `opt_level`.
  // Callers hold mu_: a target machine is not safe to use from two threads at once.
  llvm::SmallVector<char, 0> Generate(llvm::Module& module, int opt_level, bool assembly);

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  // For the optimiser's cost queries and the data layout; codegen uses codegen_machines_.
  std::unique_ptr<llvm::TargetMachine> target_machine_;
  // One target machine per optimisation level 0..3 (made on first use): LLVM's codegen
  // level is a property of the target machine.
  std::array<std::unique_ptr<llvm::TargetMachine>, 4> codegen_machines_;
  std::mutex mu_;
  // Held shared by every Add for its whole LLVM work (optimisation included, which runs
  // outside mu_ and takes LLVM's own global locks); a fork takes it exclusively, so the
  // child never inherits a lock a compiling thread held.
  std::shared_mutex working_;
  uint64_t next_dylib_ = 0;
};

}  // namespace fj::cpu
