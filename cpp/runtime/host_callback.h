// Host callbacks: functions of the embedding program (fusionjit.debug.print and
// debug.callback, from Python) that a compiled program calls between its kernels, with its
// values. The IR names one as a custom call whose target is kHostCallbackPrefix and its
// registration id; such a call has side effects (ir/instruction.h: HasSideEffects), so the
// passes neither remove, duplicate nor merge it.
//
// A registration lasts while someone holds it: the front end while it keeps the traced
// program, and an executable that calls it (Executable::keep_alive) while it lives. The
// registry itself holds none, so a function and what it closes over are freed with the last
// program that calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fj {

struct HostCallback {
  // Called on the thread that runs the program, with the call's operand buffers (the
  // values, laid out as their shapes say) and its result buffers, to fill. It reports a
  // failure by throwing; the program then stops at its end and raises it
  // (runtime/run_status.h).
  std::function<void(void* const* operands, void* const* results)> fn;
  int num_operands = 0;
  int num_results = 0;
};

// Makes the registry now (the extension does at import: see bindings/module.cc).
void InitializeHostCallbacks();
// Registers `callback`; `*id` is its id, never reused in the process.
std::shared_ptr<const HostCallback> RegisterHostCallback(HostCallback callback, int64_t* id);
// The callback registered as `id`, or null once its last holder let it go.
std::shared_ptr<const HostCallback> FindHostCallback(int64_t id);
// The id of the host callback a custom-call target names; -1 for other targets.
int64_t HostCallbackId(const std::string& target);

// What generated code calls for a host callback: its buffer table holds the results, then
// the operands. Never throws: a failure is recorded in the run's status.
extern "C" void FjRunHostCallback(int64_t id, void** table);

}  // namespace fj
