// Debug flags from the environment (see flags.h).
#include "support/flags.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fj {

DebugFlags& GetDebugFlags() {
  static DebugFlags flags = [] {
    DebugFlags f;
    if (const char* v = std::getenv("FJ_DEBUG")) f.debug_level = std::atoi(v);
    if (const char* v = std::getenv("FJ_CHECKS")) f.checks = std::atoi(v) != 0;
    if (const char* v = std::getenv("FJ_DUMP_DIR")) f.dump_dir = v;
    return f;
  }();
  return flags;
}

void DebugPrint(int level, const std::string& what, const std::string& text) {
  if (GetDebugFlags().debug_level < level) return;
  static std::mutex mu;  // whole dumps, not interleaved lines, from concurrent compiles
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[fusionjit] ---- %s ----\n%s\n", what.c_str(), text.c_str());
  std::fflush(stderr);
}

}  // namespace fj
