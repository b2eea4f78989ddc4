// The thread pool (see thread_pool.h).
#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
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
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

namespace {

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

ThreadPool& ThreadPool::Global() {
  if (ThreadPool* pool = g_pool.load(std::memory_order_acquire)) return *pool;
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(&BeforeFork, &AfterForkInParent, &AfterForkInChild); });
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
    job.kernel(job.buffers, begin, std::min(job.units, begin + job.chunk));
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    {
      RunStatus::Scope scope(job_.status);
      RunChunks(job_);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_.notify_all();
    }
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_.kernel = kernel;
    job_.buffers = buffers;
    job_.units = units;
    job_.chunk = chunk;
    job_.next.store(0);
    job_.status = RunStatus::Current();
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  RunChunks(job_);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return busy_ == 0; });
}

}  // namespace fj
