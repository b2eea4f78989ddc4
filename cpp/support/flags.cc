// Debug flags from the environment (see flags.h).
#include "support/flags.h"

#include <cstdlib>

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

}  // namespace fj
