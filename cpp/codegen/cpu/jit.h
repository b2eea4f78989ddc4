// The process-wide ORC LLJIT and the optimisation pipeline for the host CPU.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Target/TargetMachine.h"

namespace fj::cpu {

class JitEngine {
 public:
  static JitEngine& Get();

  // Optimises `module` at `opt_level` for the host, then adds it to the JIT in a dylib of
  // its own. Returns the address of `symbol` and an owner whose destruction frees the code.
  // `ir_out`, if given, receives the optimised IR.
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

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::TargetMachine> target_machine_;
  std::mutex mu_;
  uint64_t next_dylib_ = 0;
};

}  // namespace fj::cpu
