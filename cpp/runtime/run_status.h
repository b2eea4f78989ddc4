// The status of one program run. Generated code calls C++ (custom calls) but must never be
// unwound by a C++ exception: a custom call catches what it throws and records it here, and
// Executable::Run raises it when the program returns. Every thread that runs part of a
// program (the caller, and pool workers during its parallel loops) points at its run's status.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "support/error.h"

namespace fj {

class RunStatus {
 public:
  // Records a failure (the first one wins).
  void Fail(ErrorCode code, const std::string& message);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Throws the recorded failure as fj::Error, if any.
  void RaiseIfFailed() const;

  // The status of the run this thread is working for (null outside a run).
  static RunStatus* Current();

  // Makes `status` this thread's current status for the scope's lifetime.
  class Scope {
   public:
    explicit Scope(RunStatus* status);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    RunStatus* saved_;
  };

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  ErrorCode code_ = ErrorCode::kInternal;
  std::string message_;
};

// Runs `body` (a custom call's work); an exception it throws is recorded in the current
// run's status instead of unwinding through generated code.
template <typename F>
void RunGuarded(const char* target, F&& body) noexcept {
  try {
    body();
  } catch (const std::bad_alloc&) {
    if (RunStatus* s = RunStatus::Current()) {
      s->Fail(ErrorCode::kResourceExhausted, StrCat("custom call '", target, "' ran out of memory"));
    }
  } catch (const std::exception& e) {
    if (RunStatus* s = RunStatus::Current()) {
      s->Fail(ErrorCode::kInternal, StrCat("custom call '", target, "' failed: ", e.what()));
    }
  } catch (...) {
    if (RunStatus* s = RunStatus::Current()) {
      s->Fail(ErrorCode::kInternal, StrCat("custom call '", target, "' failed"));
    }
  }
}

}  // namespace fj
