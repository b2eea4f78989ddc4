// Debug flags read once from the environment: FJ_DEBUG (0-4), FJ_CHECKS (verifier after
// every pass), FJ_DUMP_DIR (write each stage to a directory).
#pragma once

#include <string>

namespace fj {

struct DebugFlags {
  int debug_level = 0;    // FJ_DEBUG: 1 stage timings, 2 IR, 3 LLVM IR, 4 everything
  bool checks = false;    // FJ_CHECKS=1: Module::Verify after every pass
  std::string dump_dir;   // FJ_DUMP_DIR: NN-<stage>.fjir / .ll / .dot
};

// The flags, read from the environment on first use. Mutable so tests can set them.
DebugFlags& GetDebugFlags();

// With FJ_DEBUG >= `level`, prints `text` to stderr under a header naming `what`.
void DebugPrint(int level, const std::string& what, const std::string& text);

}  // namespace fj
