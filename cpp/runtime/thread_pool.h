// A small thread pool for data-parallel kernels: the calling thread works too, and a call
// returns when every chunk is done. One parallel loop runs at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/run_status.h"
#include "support/abi.h"

namespace fj {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs kernel(buffers, b, e) over [0, units), in chunks that are whole multiples of
  // `grain` units (the last one excepted).
  void ParallelFor(FjKernelFn kernel, void** buffers, int64_t units, int64_t grain);

  // The process-wide pool: FUSIONJIT_NUM_THREADS threads, else one per core. A process
  // forked from one that used it gets a pool of its own.
  static ThreadPool& Global();
  // Fork handlers: no parallel loop runs across a fork.
  void LockForFork() { job_mu_.lock(); }
  void UnlockAfterFork() { job_mu_.unlock(); }
  // The runtime table for generated code, bound to this pool.
  const FjRuntimeApi* api() const { return &api_; }

 private:
  struct Job {
    FjKernelFn kernel = nullptr;
    void** buffers = nullptr;
    int64_t units = 0;
    int64_t chunk = 1;
    std::atomic<int64_t> next{0};
    RunStatus* status = nullptr;  // the caller's run, which workers report to
  };
  void WorkerLoop();
  void RunChunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::mutex job_mu_;  // one ParallelFor at a time
  Job job_;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  FjRuntimeApi api_;
};

}  // namespace fj
