// The runtime: the thread pool's parallel loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/thread_pool.h"

namespace fj {
namespace {

struct Chunks {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
};

void Record(void** buffers, int64_t begin, int64_t end) {
  auto* chunks = static_cast<Chunks*>(buffers[0]);
  std::lock_guard<std::mutex> lock(chunks->mu);
  chunks->ranges.emplace_back(begin, end);
}

std::vector<std::pair<int64_t, int64_t>> RunRecorded(ThreadPool& pool, int64_t units, int64_t grain) {
  Chunks chunks;
  void* buffers[] = {&chunks};
  pool.ParallelFor(&Record, buffers, units, grain);
  std::sort(chunks.ranges.begin(), chunks.ranges.end());
  return chunks.ranges;
}

TEST(ThreadPool, ChunksCoverTheUnitsOnceInWholeGrains) {
  ThreadPool pool(3);
  // 1000 units in grains of 16 (an elementwise kernel's vectors): with 3 threads an
  // unaligned split would make chunks of 84 units, each ending mid-vector.
  for (auto [units, grain] : std::vector<std::pair<int64_t, int64_t>>{{256, 64}, {1000, 16}, {37, 1}, {5, 8}}) {
    auto ranges = RunRecorded(pool, units, grain);
    ASSERT_FALSE(ranges.empty());
    int64_t next = 0;
    for (auto [begin, end] : ranges) {
      EXPECT_EQ(begin, next) << "units " << units << " grain " << grain;
      EXPECT_EQ(begin % grain, 0) << "units " << units << " grain " << grain;
      if (end != units) {
        EXPECT_EQ((end - begin) % grain, 0) << "units " << units << " grain " << grain;
      }
      next = end;
    }
    EXPECT_EQ(next, units);
  }
  // Enough grains for every thread: the work is shared, not run as one chunk.
  EXPECT_GT(RunRecorded(pool, 256, 64).size(), 1u);
}

struct Owners {
  std::mutex mu;
  std::vector<std::thread::id> ids;
};

void RecordOwner(void** buffers, int64_t begin, int64_t end) {
  auto* owners = static_cast<Owners*>(buffers[0]);
  std::lock_guard<std::mutex> lock(owners->mu);
  for (int64_t i = begin; i < end; ++i) owners->ids[i] = std::this_thread::get_id();
}

// A worker's wake-up can take longer than the whole loop (tens of microseconds on a virtual
// machine): the caller must not wait for it. Before, every call waited until each worker
// had woken and checked in, and a held worker made this test hang.
TEST(ThreadPool, ACallDoesNotWaitForWorkersThatDoNotCome) {
  ThreadPool pool(2);
  pool.HoldWorkersForTesting(true);
  for (int round = 0; round < 3; ++round) {
    Owners owners;
    owners.ids.assign(1000, std::thread::id());
    void* buffers[] = {&owners};
    auto call = std::async(std::launch::async, [&] { pool.ParallelFor(&RecordOwner, buffers, 1000, 10); });
    bool returned = call.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    if (!returned) pool.HoldWorkersForTesting(false);  // lets the call end, so the test can fail
    ASSERT_TRUE(returned) << "the call waited for a held worker";
    std::thread::id caller = owners.ids[0];
    for (std::thread::id id : owners.ids) EXPECT_EQ(id, caller);
  }
  pool.HoldWorkersForTesting(false);
  // Released, the workers join later loops (and the ones they missed leave no trace).
  auto ranges = RunRecorded(pool, 4096, 16);
  int64_t covered = 0;
  for (auto [begin, end] : ranges) covered += end - begin;
  EXPECT_EQ(covered, 4096);
}

// Loops back to back and apart (workers spinning, then asleep), each unit run exactly once.
TEST(ThreadPool, EveryUnitRunsOnceAcrossManyLoops) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 2000; ++rep) {
    int64_t units = 1 + (rep * 7919) % 3000;
    std::vector<std::atomic<int>> runs(units);
    void* buffers[] = {&runs};
    pool.ParallelFor(
        [](void** b, int64_t begin, int64_t end) {
          auto& r = *static_cast<std::vector<std::atomic<int>>*>(b[0]);
          for (int64_t i = begin; i < end; ++i) r[i].fetch_add(1);
        },
        buffers, units, 1 + rep % 13);
    for (int64_t i = 0; i < units; ++i) ASSERT_EQ(runs[i].load(), 1) << "loop " << rep << " unit " << i;
    if (rep % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers fall asleep
  }
}

}  // namespace
}  // namespace fj
