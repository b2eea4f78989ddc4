// Executable: a compiled program with its signature, and what runs it on its backend.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "ir/module.h"
#include "ir/shape.h"
#include "runtime/buffer.h"
#include "support/abi.h"
#include "support/target.h"

namespace fj {

// What one kernel launch does, for counting and for `explain`.
struct KernelInfo {
  std::string name;    // the LLVM function
  std::string fusion;  // the fusion instruction it implements
  std::string kind;    // kLoop / kInput / kOutput
  int64_t units = 0;   // iteration units (elements or rows)
  int width = 1;       // lanes per step of the kernel's innermost vector loop
  bool parallel = false;
  int64_t grain = 1;   // the thread pool hands out units in multiples of this
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  std::string loop;    // the innermost loop it runs in ("" outside loops)
  // GPU: threads that take each unit together (a warp for row reductions, else 1).
  int threads_per_unit = 1;
};

// A loop of the program, for launch counts: its iterations are counted in an arena slot.
struct LoopInfo {
  std::string name;    // the while instruction
  std::string parent;  // the enclosing loop ("" at the top level)
  int64_t counter_offset = 0;
};

// An argument of a run: a buffer (in host or device memory) or host memory.
struct Argument {
  const void* host = nullptr;
  const Buffer* buffer = nullptr;  // when set, `host` is not used
  // The argument's buffer, given up by the caller (a donation): an output aliasing this
  // parameter (Executable::output_aliases) takes it over instead of a buffer of its own.
  // Only host memory that nothing else reads.
  std::shared_ptr<Buffer> donated;
};

// A compiled program on a backend, with its signature and what it launches. Subclasses run
// it: CpuExecutable here, GpuExecutable (runtime/gpu/) for the GPU and its emulation.
class Executable {
 public:
  Executable(Backend backend, std::vector<Shape> parameters, std::vector<Shape> outputs, int64_t temp_bytes,
             std::vector<KernelInfo> kernels, std::vector<LoopInfo> loops);
  virtual ~Executable() = default;

  Backend backend() const { return backend_; }
  // The device the outputs are on (null: host memory).
  virtual std::shared_ptr<Device> device() const { return nullptr; }
  const std::vector<Shape>& parameter_shapes() const { return parameters_; }
  const std::vector<Shape>& output_shapes() const { return outputs_; }
  const std::vector<KernelInfo>& kernels() const { return kernels_; }
  const std::vector<LoopInfo>& loops() const { return loops_; }
  // Iterations each loop ran in the most recent call (in loops() order; loops nested in
  // others count all their runs). Calls racing on threads may leave counts of several.
  std::vector<int64_t> last_loop_iterations() const;
  int64_t temp_bytes() const { return temp_bytes_; }
  // Per output: the donated parameter whose buffer it may take over (empty: none).
  const std::vector<OutputAlias>& output_aliases() const { return aliases_; }
  void set_output_aliases(std::vector<OutputAlias> aliases) { aliases_ = std::move(aliases); }
  // What the program's code calls and must outlive it: its host callbacks.
  void set_keep_alive(std::vector<std::shared_ptr<const void>> held) { keep_alive_ = std::move(held); }
  // Compiled with CompileOptions::profile: per kernel (kernels() order), nanoseconds spent
  // in its launches and the number of launches, summed over the calls since the last
  // ResetProfile. Empty when not profiled.
  struct KernelTime {
    int64_t nanoseconds = 0;
    int64_t launches = 0;
  };
  virtual std::vector<KernelTime> Profile() const { return {}; }
  virtual void ResetProfile() const {}

  // Runs the program on `args` (one per parameter) and returns the outputs, allocated on
  // device(). Thread-safe. Throws fj::Error when a kernel or the device fails.
  virtual std::vector<std::shared_ptr<Buffer>> Run(const std::vector<Argument>& args) const = 0;
  // Runs on host memory: params[i] points at parameter i's elements (row-major).
  std::vector<std::shared_ptr<Buffer>> Run(const void* const* params) const;

 protected:
  // Keeps the loops' iteration counts of a call, read from `counters` at their offsets.
  void RecordLoopCounts(const char* counters) const;

 private:
  Backend backend_;
  std::vector<Shape> parameters_;
  std::vector<Shape> outputs_;
  int64_t temp_bytes_;
  std::vector<KernelInfo> kernels_;
  std::vector<LoopInfo> loops_;
  std::vector<OutputAlias> aliases_;
  std::vector<std::shared_ptr<const void>> keep_alive_;
  // Atomic rather than behind a lock: a run records them without the GIL, and a lock
  // held by another thread when the process forks would never be released in the child.
  std::unique_ptr<std::atomic<int64_t>[]> last_iterations_;
};

// On the CPU the whole program is one native function (loops and kernel calls included),
// so running it is one call.
class CpuExecutable final : public Executable {
 public:
  CpuExecutable(FjEntryFn entry, std::shared_ptr<void> code, std::vector<Shape> parameters,
                std::vector<Shape> outputs, int64_t temp_bytes, std::vector<KernelInfo> kernels,
                std::vector<LoopInfo> loops = {}, std::shared_ptr<std::atomic<int64_t>[]> profile = nullptr);
  std::vector<std::shared_ptr<Buffer>> Run(const std::vector<Argument>& args) const override;
  std::vector<KernelTime> Profile() const override;
  void ResetProfile() const override;
  using Executable::Run;
  // Runs into caller-provided output pointers.
  void RunInto(const void* const* params, void* const* outputs) const;

 private:
  FjEntryFn entry_;
  std::shared_ptr<void> code_;
  // A reusable scratch arena; a concurrent call that finds it busy allocates its own.
  mutable std::atomic<bool> arena_busy_{false};
  mutable std::shared_ptr<Buffer> arena_;
  // Profiled code adds to these (nanoseconds and launches per kernel, interleaved).
  std::shared_ptr<std::atomic<int64_t>[]> profile_;
};

}  // namespace fj
