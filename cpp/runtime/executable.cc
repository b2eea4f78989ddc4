// Executables (see executable.h).
#include "runtime/executable.h"

#include <cstring>

#include "runtime/run_status.h"
#include "runtime/thread_pool.h"

namespace fj {

Executable::Executable(Backend backend, std::vector<Shape> parameters, std::vector<Shape> outputs,
                       int64_t temp_bytes, std::vector<KernelInfo> kernels, std::vector<LoopInfo> loops)
    : backend_(backend),
      parameters_(std::move(parameters)),
      outputs_(std::move(outputs)),
      temp_bytes_(temp_bytes),
      kernels_(std::move(kernels)),
      loops_(std::move(loops)),
      last_iterations_(new std::atomic<int64_t>[loops_.size()]()) {}

std::vector<std::shared_ptr<Buffer>> Executable::Run(const void* const* params) const {
  std::vector<Argument> args(parameters_.size());
  for (size_t i = 0; i < args.size(); ++i) args[i].host = params[i];
  return Run(args);
}

CpuExecutable::CpuExecutable(FjEntryFn entry, std::shared_ptr<void> code, std::vector<Shape> parameters,
                             std::vector<Shape> outputs, int64_t temp_bytes, std::vector<KernelInfo> kernels,
                             std::vector<LoopInfo> loops, std::shared_ptr<std::atomic<int64_t>[]> profile)
    : Executable(Backend::kCpu, std::move(parameters), std::move(outputs), temp_bytes, std::move(kernels),
                 std::move(loops)),
      entry_(entry),
      code_(std::move(code)),
      profile_(std::move(profile)) {
  if (temp_bytes > 0) arena_ = Buffer::Allocate(temp_bytes);
}

std::vector<Executable::KernelTime> CpuExecutable::Profile() const {
  if (!profile_) return {};
  std::vector<KernelTime> times(kernels().size());
  for (size_t k = 0; k < times.size(); ++k) {
    times[k] = {profile_[2 * k].load(std::memory_order_relaxed), profile_[2 * k + 1].load(std::memory_order_relaxed)};
  }
  return times;
}

void CpuExecutable::ResetProfile() const {
  if (!profile_) return;
  for (size_t i = 0; i < 2 * kernels().size(); ++i) profile_[i].store(0, std::memory_order_relaxed);
}

void CpuExecutable::RunInto(const void* const* params, void* const* outputs) const {
  const FjRuntimeApi* api = ThreadPool::Global().api();
  RunStatus status;
  {
    RunStatus::Scope scope(&status);
    if (temp_bytes() == 0) {
      entry_(const_cast<void* const*>(params), outputs, nullptr, api);
    } else {
      bool expected = false;
      if (arena_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        entry_(const_cast<void* const*>(params), outputs, static_cast<char*>(arena_->data()), api);
        RecordLoopCounts(static_cast<const char*>(arena_->data()));
        arena_busy_.store(false, std::memory_order_release);
      } else {
        std::shared_ptr<Buffer> own = Buffer::Allocate(temp_bytes());
        entry_(const_cast<void* const*>(params), outputs, static_cast<char*>(own->data()), api);
        RecordLoopCounts(static_cast<const char*>(own->data()));
      }
    }
  }
  status.RaiseIfFailed();
}

std::vector<std::shared_ptr<Buffer>> CpuExecutable::Run(const std::vector<Argument>& args) const {
  std::vector<const void*> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) params[i] = args[i].buffer ? args[i].buffer->HostData() : args[i].host;
  std::vector<std::shared_ptr<Buffer>> out;
  std::vector<void*> ptrs;
  out.reserve(output_shapes().size());
  const std::vector<OutputAlias>& aliases = output_aliases();
  for (size_t k = 0; k < output_shapes().size(); ++k) {
    int64_t bytes = output_shapes()[k].ByteSize();
    OutputAlias alias = k < aliases.size() ? aliases[k] : OutputAlias{};
    const std::shared_ptr<Buffer>* donated = alias.parameter >= 0 ? &args[alias.parameter].donated : nullptr;
    if (donated && *donated && (*donated)->data() == params[alias.parameter] && (*donated)->size() >= bytes) {
      out.push_back(*donated);  // holds the parameter's elements already
    } else {
      out.push_back(Buffer::Allocate(bytes));
      // Not given up: the output starts as a copy of the parameter where it is updated.
      if (alias.updated && bytes > 0) std::memcpy(out.back()->data(), params[alias.parameter], bytes);
    }
    // The program reads an updated parameter from the output's buffer.
    if (alias.updated) params[alias.parameter] = out.back()->data();
    ptrs.push_back(out.back()->data());
  }
  RunInto(params.data(), ptrs.data());
  return out;
}

void Executable::RecordLoopCounts(const char* counters) const {
  for (size_t i = 0; i < loops_.size(); ++i) {
    int64_t count;
    std::memcpy(&count, counters + loops_[i].counter_offset, sizeof(int64_t));
    last_iterations_[i].store(count, std::memory_order_relaxed);
  }
}

std::vector<int64_t> Executable::last_loop_iterations() const {
  std::vector<int64_t> counts(loops_.size());
  for (size_t i = 0; i < loops_.size(); ++i) counts[i] = last_iterations_[i].load(std::memory_order_relaxed);
  return counts;
}

}  // namespace fj
