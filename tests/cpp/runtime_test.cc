// The runtime: the thread pool's parallel loop.
#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
}  // namespace fj
