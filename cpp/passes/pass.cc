// The pipeline driver: runs passes, verifies in checked mode, dumps stages.
#include "passes/pass.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "ir/verifier.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj {

bool Pipeline::Run(Module& module) {
  const DebugFlags& flags = GetDebugFlags();
  bool changed_any = false;
  for (int iteration = 0; iteration < max_iterations_; ++iteration) {
    bool changed = false;
    for (auto& pass : passes_) {
      auto start = std::chrono::steady_clock::now();
      bool c = pass->Run(module);
      module.ReleaseRemoved();
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      records_.push_back({std::string(pass->name()), c, seconds});
      if (flags.debug_level >= 1) {
        std::fprintf(stderr, "[fusionjit] %s: %-28s %s %.3f ms\n", module.name().c_str(),
                     std::string(pass->name()).c_str(), c ? "changed  " : "unchanged",
                     seconds * 1e3);
      }
      if (c) {
        if (flags.checks) {
          try {
            VerifyModule(module);
          } catch (const Error& e) {
            ThrowInternal("the IR is invalid after pass '", pass->name(), "': ", e.what());
          }
        }
        // A nested pipeline's passes have shown their own output already.
        bool nested = dynamic_cast<Pipeline*>(pass.get()) != nullptr;
        if (!nested && (!flags.dump_dir.empty() || flags.debug_level >= 2)) {
          std::string text = module.ToString();
          DumpStage(module, pass->name(), "fjir", text);
          DebugPrint(2, module.name() + " after " + std::string(pass->name()), text);
        }
      }
      changed = changed || c;
    }
    changed_any = changed_any || changed;
    if (!changed) break;
  }
  return changed_any;
}

void DumpStage(const Module& module, std::string_view stage, std::string_view ext,
               const std::string& text) {
  const std::string& dir = GetDebugFlags().dump_dir;
  if (dir.empty()) return;
  static std::atomic<int> counter{0};
  char prefix[16];
  std::snprintf(prefix, sizeof(prefix), "%04d", counter++);
  std::string path = dir + "/" + prefix + "-" + module.name() + "-" + std::string(stage) + "." +
                     std::string(ext);
  std::ofstream out(path);
  out << text;
}

}  // namespace fj
