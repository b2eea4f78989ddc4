// The thread pool (see thread_pool.h).
#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace fj {
namespace {

void ParallelForTrampoline(void* pool, FjKernelFn kernel, void** buffers, int64_t units,
                           int64_t grain) {
  static_cast<ThreadPool*>(pool)->ParallelFor(kernel, buffers, units, grain);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  api_.parallel_for = &ParallelForTrampoline;
  api_.pool = this;
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker about to sleep sees stop_ first
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

namespace {

// One step of a busy wait: a hint to the core (another hardware thread may run meanwhile).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Waits until `ready()`: spins briefly, then yields the core to other threads between looks
// (a chunk another thread runs may take a while; its thread may even be off the core).
template <typename Ready>
void SpinUntil(Ready ready) {
  for (int i = 0; i < 4096; ++i) {
    if (ready()) return;
    CpuRelax();
  }
  while (!ready()) std::this_thread::yield();
}

// The process-wide pool, made on first use. fork() copies only the calling thread, so a
// child that inherited a pool with workers would wait for them forever: the fork handlers
// below let no parallel loop straddle a fork, and give the child a fresh pool (the
// parent's is leaked there, its threads are gone).
std::atomic<ThreadPool*> g_pool{nullptr};
std::mutex g_pool_mu;

void BeforeFork() {
  g_pool_mu.lock();
  if (ThreadPool* pool = g_pool.load()) pool->LockForFork();
}

void AfterForkInParent() {
  if (ThreadPool* pool = g_pool.load()) pool->UnlockAfterFork();
  g_pool_mu.unlock();
}

void AfterForkInChild() {
  g_pool.store(nullptr);
  g_pool_mu.unlock();
}

}  // namespace

void ThreadPool::InstallForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(&BeforeFork, &AfterForkInParent, &AfterForkInChild); });
}

ThreadPool& ThreadPool::Global() {
  if (ThreadPool* pool = g_pool.load(std::memory_order_acquire)) return *pool;
  InstallForkHandlers();
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (ThreadPool* pool = g_pool.load()) return *pool;
  // Never destroyed: worker threads must not be joined during interpreter teardown.
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("FUSIONJIT_NUM_THREADS")) n = std::atoi(env);
  auto* pool = new ThreadPool(std::max(1, n));
  g_pool.store(pool, std::memory_order_release);
  return *pool;
}

void ThreadPool::RunChunks(Job& job) {
  while (true) {
    int64_t begin = job.next.fetch_add(job.chunk);
    if (begin >= job.units) return;
    int64_t end = std::min(job.units, begin + job.chunk);
    job.kernel(job.buffers, begin, end);
    job.done.fetch_add(end - begin, std::memory_order_acq_rel);  // publishes the chunk's writes
  }
}

uint64_t ThreadPool::AwaitGeneration(uint64_t seen) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
  for (int i = 0;; ++i) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    CpuRelax();
    if (i % 64 == 63) {
      if (std::chrono::steady_clock::now() > deadline) break;
      if (i >= 1024) std::this_thread::yield();  // let other work have the core
    }
  }
  // Asleep until a caller opens a job. `sleeping_` is raised before the last look at the
  // generation and a caller reads it after publishing one (both sequentially consistent):
  // either this thread sees the job, or the caller sees a sleeper and wakes it.
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_.fetch_add(1);
  wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
  sleeping_.fetch_sub(1);
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    uint64_t g = AwaitGeneration(seen);
    if (stop_.load()) return;
    seen = g;
    if (g % 2 == 0) continue;  // closed before this thread came: nothing to do
    while (hold_.load() && !stop_.load()) std::this_thread::yield();
    // Join, then make sure the job is still open: a caller closes it and then waits until no
    // worker is inside, so a worker inside reads fields that nobody is rewriting.
    inside_.fetch_add(1);
    if (generation_.load() == g) {
      RunStatus::Scope scope(job_.status);
      RunChunks(job_);
    }
    inside_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::ParallelFor(FjKernelFn kernel, void** buffers, int64_t units, int64_t grain) {
  if (units <= 0) return;
  int threads = num_threads();
  grain = std::max<int64_t>(grain, 1);
  if (threads == 1 || units <= grain) {
    kernel(buffers, 0, units);
    return;
  }
  std::lock_guard<std::mutex> job_lock(job_mu_);
  // A few chunks per thread balance uneven progress without much overhead. Chunks are
  // whole multiples of the grain: a kernel's vector loop covers a chunk only in steps of
  // its width, so a chunk cut mid-vector would run on its scalar tail.
  int64_t chunk = std::max<int64_t>(grain, (units + 4 * threads - 1) / (4 * threads));
  chunk = (chunk + grain - 1) / grain * grain;
  job_.kernel = kernel;
  job_.buffers = buffers;
  job_.units = units;
  job_.chunk = chunk;
  job_.next.store(0, std::memory_order_relaxed);
  job_.done.store(0, std::memory_order_relaxed);
  job_.status = RunStatus::Current();
  uint64_t open = generation_.load(std::memory_order_relaxed) + 1;
  generation_.store(open);  // publishes the fields above
  if (sleeping_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  RunChunks(job_);
  // Every chunk taken is finished; then the job closes and waits out workers that joined.
  SpinUntil([&] { return job_.done.load(std::memory_order_acquire) >= units; });
  generation_.store(open + 1);
  SpinUntil([&] { return inside_.load() == 0; });
}

}  // namespace fj
