// A small thread pool for data-parallel kernels: the calling thread works too, and a call
// returns when every chunk is done. One parallel loop runs at a time.
//
// Handing work to a sleeping thread costs a wake-up, tens of microseconds on a virtual
// machine: as much as a whole kernel of 10^5 elements. So workers that have just worked
// watch for the next loop a little while (kSpinMicros) before they sleep, and a call never
// waits for a worker to turn up: it waits only for the chunks that were taken, and a worker
// that comes late finds none left. A call is never slower than running on the caller alone.
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
  // Registers the fork handlers (idempotent; Global() calls it too). The extension calls it
  // at import, so that no thread is inside its one-time registration when another forks.
  static void InstallForkHandlers();
  // Fork handlers: no parallel loop runs across a fork.
  void LockForFork() { job_mu_.lock(); }
  void UnlockAfterFork() { job_mu_.unlock(); }
  // Tests: while held, workers that see a new loop do not join it (as if their wake-up were
  // slow): the caller must then run every chunk itself.
  void HoldWorkersForTesting(bool hold) { hold_.store(hold); }
  // The runtime table for generated code, bound to this pool.
  const FjRuntimeApi* api() const { return &api_; }

 private:
  // How long a worker watches for the next loop before it sleeps.
  static constexpr int64_t kSpinMicros = 200;

  struct Job {
    FjKernelFn kernel = nullptr;
    void** buffers = nullptr;
    int64_t units = 0;
    int64_t chunk = 1;
    std::atomic<int64_t> next{0};  // the first unit no thread has taken
    std::atomic<int64_t> done{0};  // units finished
    RunStatus* status = nullptr;   // the caller's run, which workers report to
  };
  void WorkerLoop();
  // The generation after `seen` (or after stop): spins for a while, then sleeps.
  uint64_t AwaitGeneration(uint64_t seen);
  void RunChunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // one ParallelFor at a time
  Job job_;
  // Odd while a job is open for workers to join; the job's fields are written only while
  // it is even and no worker is inside.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> inside_{0};    // workers that joined the open job
  std::atomic<int> sleeping_{0};  // workers asleep on wake_
  std::atomic<bool> stop_{false};
  std::atomic<bool> hold_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  FjRuntimeApi api_;
};

}  // namespace fj
