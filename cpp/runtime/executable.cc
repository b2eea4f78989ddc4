// Executables (see executable.h).
#include "runtime/executable.h"

#include <cstring>

#include "runtime/run_status.h"
#include "runtime/thread_pool.h"

namespace fj {

Executable::Executable(FjEntryFn entry, std::shared_ptr<void> code, std::vector<Shape> parameters,
                       std::vector<Shape> outputs, int64_t temp_bytes,
                       std::vector<KernelInfo> kernels, std::vector<LoopInfo> loops)
    : entry_(entry),
      code_(std::move(code)),
      parameters_(std::move(parameters)),
      outputs_(std::move(outputs)),
      temp_bytes_(temp_bytes),
      kernels_(std::move(kernels)),
      loops_(std::move(loops)) {
  if (temp_bytes_ > 0) arena_ = Buffer::Allocate(temp_bytes_);
}

void Executable::RunInto(const void* const* params, void* const* outputs) const {
  const FjRuntimeApi* api = ThreadPool::Global().api();
  RunStatus status;
  {
    RunStatus::Scope scope(&status);
    if (temp_bytes_ == 0) {
      entry_(const_cast<void* const*>(params), outputs, nullptr, api);
    } else {
      bool expected = false;
      if (arena_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        entry_(const_cast<void* const*>(params), outputs, static_cast<char*>(arena_->data()), api);
        RecordLoopCounts(static_cast<const char*>(arena_->data()));
        arena_busy_.store(false, std::memory_order_release);
      } else {
        std::shared_ptr<Buffer> own = Buffer::Allocate(temp_bytes_);
        entry_(const_cast<void* const*>(params), outputs, static_cast<char*>(own->data()), api);
        RecordLoopCounts(static_cast<const char*>(own->data()));
      }
    }
  }
  status.RaiseIfFailed();
}

std::vector<std::shared_ptr<Buffer>> Executable::Run(const void* const* params) const {
  std::vector<std::shared_ptr<Buffer>> out;
  std::vector<void*> ptrs;
  out.reserve(outputs_.size());
  for (const Shape& s : outputs_) {
    out.push_back(Buffer::Allocate(s.ByteSize()));
    ptrs.push_back(out.back()->data());
  }
  RunInto(params, ptrs.data());
  return out;
}

void Executable::RecordLoopCounts(const char* temp) const {
  if (loops_.empty()) return;
  std::vector<int64_t> counts(loops_.size());
  for (size_t i = 0; i < loops_.size(); ++i) {
    std::memcpy(&counts[i], temp + loops_[i].counter_offset, sizeof(int64_t));
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  last_iterations_ = std::move(counts);
}

std::vector<int64_t> Executable::last_loop_iterations() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return last_iterations_.empty() ? std::vector<int64_t>(loops_.size(), 0) : last_iterations_;
}

}  // namespace fj
