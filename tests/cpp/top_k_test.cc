// The runtime's top-k kernel (runtime/top_k.h) against a stable sort by the same order,
// called whole and in every kind of split the thread pool may make.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/custom_calls.h"
#include "runtime/thread_pool.h"
#include "runtime/top_k.h"

namespace fj {
namespace {

// The reference: each row's positions stably sorted by `before` (an element of `x` comes
// first where before(a, b)), the first k kept.
template <typename T, typename Before>
std::vector<int32_t> Reference(const std::vector<T>& x, int64_t n, int64_t k, Before before) {
  int64_t rows = static_cast<int64_t>(x.size()) / n;
  std::vector<int32_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    const T* row = x.data() + r * n;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return before(row[a], row[b]); });
    out.insert(out.end(), order.begin(), order.begin() + k);
  }
  return out;
}

// Runs the custom call `target` on x [rows, n] over the units [begin, end) of each range.
template <typename T>
std::vector<int32_t> RunTopK(const std::string& target, const std::vector<T>& x, int64_t n, int64_t k,
                         const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  const CustomCall* call = FindCustomCall(target);
  EXPECT_NE(call, nullptr) << target;
  EXPECT_TRUE(call->parallel);
  int64_t rows = static_cast<int64_t>(x.size()) / n;
  std::vector<int32_t> out(rows * k, -1);
  void* buffers[] = {out.data(), const_cast<T*>(x.data()), &n, &k};
  for (auto [begin, end] : ranges) call->fn(buffers, begin, end);
  return out;
}

// Splits [0, units) into chunks of `chunk` units (the last one shorter).
std::vector<std::pair<int64_t, int64_t>> Chunks(int64_t units, int64_t chunk) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t b = 0; b < units; b += chunk) out.emplace_back(b, std::min(units, b + chunk));
  return out;
}

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t BitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// IEEE total order, descending: what jax.lax.top_k orders floats by.
bool TotalOrderBefore(float a, float b) {
  auto ordered = [](float f) {
    int32_t s = static_cast<int32_t>(BitsOf(f));
    return s < 0 ? s ^ INT32_MAX : s;
  };
  return ordered(a) > ordered(b);
}

// Rows of ties, signed zeros, infinities and NaNs of both signs and several payloads.
std::vector<float> SpecialRows(int64_t rows, int64_t n, uint32_t seed) {
  const float specials[] = {0.0f, -0.0f, Bits(0x7fc00000), Bits(0x7fc00001), Bits(0x7f800001), Bits(0xffc00000),
                            Bits(0xffffffff), INFINITY, -INFINITY, 1.0f, -1.0f, 2.0f};
  std::mt19937 rng(seed);
  std::vector<float> x(rows * n);
  for (float& v : x) v = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
  return x;
}

TEST(TopK, FloatsComeInTheTotalOrderWithTiesByPosition) {
  for (int64_t n : {1, 7, 40, 100, 1000}) {
    for (int64_t k : {int64_t{1}, int64_t{4}, int64_t{12}, int64_t{17}, n}) {
      if (k > n) continue;
      std::vector<float> x = SpecialRows(5, n, static_cast<uint32_t>(n * 31 + k));
      std::vector<int32_t> want = Reference(x, n, k, TotalOrderBefore);
      EXPECT_EQ(RunTopK("top_k.f32", x, n, k, {{0, 5 * k}}), want) << "n=" << n << " k=" << k;
    }
  }
}

TEST(TopK, IntegersAndHalvesOrderAsTheirValues) {
  std::mt19937 rng(7);
  const int64_t n = 300, k = 20;
  std::vector<int8_t> s8(4 * n);
  for (int8_t& v : s8) v = static_cast<int8_t>(rng());
  s8[5] = INT8_MIN;
  EXPECT_EQ(RunTopK("top_k.s8", s8, n, k, {{0, 4 * k}}), Reference(s8, n, k, std::greater<int8_t>()));
  std::vector<uint64_t> u64(4 * n);
  for (uint64_t& v : u64) v = (uint64_t{rng()} << 32 | rng()) >> (rng() % 64);
  EXPECT_EQ(RunTopK("top_k.u64", u64, n, k, {{0, 4 * k}}), Reference(u64, n, k, std::greater<uint64_t>()));
  std::vector<int64_t> s64(4 * n);
  for (int64_t& v : s64) v = static_cast<int64_t>(uint64_t{rng()} << 32 | rng()) % 1000;
  EXPECT_EQ(RunTopK("top_k.s64", s64, n, k, {{0, 4 * k}}), Reference(s64, n, k, std::greater<int64_t>()));
  // f16 in the total order of its bits; bf16 in it with each NaN its sign's canonical NaN
  // (as XLA:CPU: NaNs of one sign equal).
  const uint16_t halves[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0x7e01, 0x7c01, 0xfe00, 0xffff,
                             0x3f80, 0x7f80, 0xff80, 0x7fc0, 0x7fc1, 0x7f81, 0xffc0, 0xff81};
  std::vector<uint16_t> h(4 * n);
  for (uint16_t& v : h) v = halves[rng() % (sizeof(halves) / sizeof(halves[0]))];
  auto f16 = [](uint16_t a) {  // as a float of the same order (its exponent rebiased)
    uint32_t magnitude = a & 0x7fffu, sign = uint32_t{a & 0x8000u} << 16;
    return Bits(sign | (magnitude >= 0x7c00 ? 0x7f800000 | (magnitude & 0x3ff) << 13 : (magnitude << 13) + (112u << 23)));
  };
  auto bf16 = [](uint16_t a) {
    if ((a & 0x7fff) > 0x7f80) a = static_cast<uint16_t>((a & 0x8000) | 0x7fc0);
    return Bits(uint32_t{a} << 16);
  };
  EXPECT_EQ(RunTopK("top_k.f16", h, n, k, {{0, 4 * k}}),
            Reference(h, n, k, [&](uint16_t a, uint16_t b) { return TotalOrderBefore(f16(a), f16(b)); }));
  EXPECT_EQ(RunTopK("top_k.bf16", h, n, k, {{0, 4 * k}}),
            Reference(h, n, k, [&](uint16_t a, uint16_t b) { return TotalOrderBefore(bf16(a), bf16(b)); }));
}

TEST(TopK, AnySplitOfTheUnitsGivesTheSameIndices) {
  // Small k (one pass) and large k (a selection), with splits that cut rows anywhere.
  std::normal_distribution<float> normal;
  std::mt19937 rng(3);
  for (int64_t k : {3, 60}) {
    const int64_t rows = 13, n = 400;
    std::vector<float> x(rows * n);
    for (float& v : x) v = std::round(normal(rng) * 4) / 4;  // many ties
    std::vector<int32_t> want = Reference(x, n, k, TotalOrderBefore);
    for (int64_t chunk : {int64_t{1}, int64_t{2}, k - 1, k, k + 1, 2 * k + 1, int64_t{7}, rows * k}) {
      EXPECT_EQ(RunTopK("top_k.f32", x, n, k, Chunks(rows * k, chunk)), want) << "k=" << k << " chunk=" << chunk;
    }
    // A range without a row's first index writes nothing: its rows are another's.
    EXPECT_EQ(RunTopK("top_k.f32", x, n, k, {{1, k}}), std::vector<int32_t>(rows * k, -1)) << "k=" << k;
    // And through the thread pool, as generated code calls it.
    ThreadPool pool(3);
    std::vector<int32_t> out(rows * k, -1);
    int64_t nn = n, kk = k;
    void* buffers[] = {out.data(), x.data(), &nn, &kk};
    pool.ParallelFor(FindCustomCall("top_k.f32")->fn, buffers, rows * k, 1);
    EXPECT_EQ(out, want) << "k=" << k;
  }
}

}  // namespace
}  // namespace fj
