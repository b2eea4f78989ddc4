// Run statuses (see run_status.h).
#include "runtime/run_status.h"

namespace fj {
namespace {

thread_local RunStatus* g_current = nullptr;

}  // namespace

void RunStatus::Fail(ErrorCode code, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  code_ = code;
  message_ = message;
  failed_.store(true, std::memory_order_release);
}

void RunStatus::RaiseIfFailed() const {
  if (!failed()) return;
  std::lock_guard<std::mutex> lock(mu_);
  throw Error(code_, message_);
}

RunStatus* RunStatus::Current() { return g_current; }

RunStatus::Scope::Scope(RunStatus* status) : saved_(g_current) { g_current = status; }

RunStatus::Scope::~Scope() { g_current = saved_; }

}  // namespace fj
