// The custom-call registry (see custom_calls.h).
#include "runtime/custom_calls.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "runtime/run_status.h"
#include "runtime/top_k.h"

namespace fj {
namespace {

inline uint32_t Rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// Threefry-2x32 with 20 rounds (Salmon et al., Random123), as JAX's threefry2x32: operands
// k0, k1, x0, x1 (u32, the output's shape), outputs y0, y1. Compiled for AVX-512 and AVX2
// too (chosen at load time), so that the opaque kernel is as fast as the compiler can make
// it and what the custom_call lowering costs is the fusion boundary, not slow code.
__attribute__((target_clones("avx512f", "avx2", "default")))
void Threefry2x32(void** buffers, int64_t begin, int64_t end) {
  uint32_t* y0 = static_cast<uint32_t*>(buffers[0]);
  uint32_t* y1 = static_cast<uint32_t*>(buffers[1]);
  const uint32_t* k0 = static_cast<const uint32_t*>(buffers[2]);
  const uint32_t* k1 = static_cast<const uint32_t*>(buffers[3]);
  const uint32_t* c0 = static_cast<const uint32_t*>(buffers[4]);
  const uint32_t* c1 = static_cast<const uint32_t*>(buffers[5]);
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  for (int64_t i = begin; i < end; ++i) {
    uint32_t ks[3] = {k0[i], k1[i], k0[i] ^ k1[i] ^ 0x1BD11BDAu};
    uint32_t x0 = c0[i] + ks[0];
    uint32_t x1 = c1[i] + ks[1];
    for (int block = 0; block < 5; ++block) {
      for (int r = 0; r < 4; ++r) {
        x0 += x1;
        x1 = Rotl(x1, kRot[block % 2][r]);
        x1 ^= x0;
      }
      x0 += ks[(block + 1) % 3];
      x1 += ks[(block + 2) % 3] + static_cast<uint32_t>(block + 1);
    }
    y0[i] = x0;
    y1[i] = x1;
  }
}

// Stable sort of each row by u32 keys, carrying values of `kBytes` bytes: operands keys
// [rows, n], values [rows, n], n (s64 scalar); outputs sorted keys and values. As XLA's
// sort with is_stable=True (jax.lax.sort_key_val), so permutations match JAX bit for bit.
template <int kBytes>
void SortKeyVal(void** buffers, int64_t begin, int64_t end) {
  uint32_t* out_keys = static_cast<uint32_t*>(buffers[0]);
  char* out_values = static_cast<char*>(buffers[1]);
  const uint32_t* keys = static_cast<const uint32_t*>(buffers[2]);
  const char* values = static_cast<const char*>(buffers[3]);
  int64_t n = *static_cast<const int64_t*>(buffers[4]);
  if (n <= 0) return;
  if (n > (int64_t{1} << 32)) throw std::length_error("sort_key_val: rows longer than 2^32 elements");
  // Each element as (key << 32 | position): sorting these integers is a stable sort by key
  // (equal keys keep their positions' order), with no indirection in the comparisons.
  std::vector<uint64_t> packed(n);
  for (int64_t row = begin / n; row < (end + n - 1) / n; ++row) {
    const uint32_t* k = keys + row * n;
    for (int64_t i = 0; i < n; ++i) packed[i] = (uint64_t{k[i]} << 32) | static_cast<uint64_t>(i);
    std::sort(packed.begin(), packed.end());
    for (int64_t i = 0; i < n; ++i) {
      int64_t from = static_cast<int64_t>(packed[i] & 0xffffffffu);
      out_keys[row * n + i] = static_cast<uint32_t>(packed[i] >> 32);
      std::memcpy(out_values + (row * n + i) * kBytes, values + (row * n + from) * kBytes, kBytes);
    }
  }
}

// For the tests of the error path: fails the way a custom call that runs out of memory or
// meets a bug would.
void Fail(void** buffers, int64_t begin, int64_t end) {
  if (*static_cast<const int32_t*>(buffers[1]) != 0) throw std::bad_alloc();
  throw std::runtime_error("failing as asked (testing.fail)");
}

// What generated code calls: the custom call's body, with its exceptions caught and
// reported through the run's status (RunGuarded), never unwound through generated code.
#define FJ_GUARDED(name, fn)                                            \
  [](void** buffers, int64_t begin, int64_t end) {                      \
    RunGuarded(name, [&] { fn(buffers, begin, end); });                 \
  }

// top_k.<dtype> (runtime/top_k.h): x [rows, n], n, k -> the s32 indices [rows, k].
#define FJ_TOP_K(dtype, order, bytes)                                                     \
  CustomCall{"top_k." dtype, FJ_GUARDED("top_k." dtype, (TopK<TopKOrder::order, bytes>)), \
             "top_k of rows of " dtype ": (x [rows, n], n, k) -> s32 indices [rows, k]", true}

const std::vector<CustomCall>& Registry() {
  static const std::vector<CustomCall>* calls = new std::vector<CustomCall>{
      {"threefry2x32", FJ_GUARDED("threefry2x32", Threefry2x32),
       "Threefry-2x32 (20 rounds): (k0, k1, x0, x1) -> (y0, y1), u32", true},
      {"sort_key_val.1", FJ_GUARDED("sort_key_val.1", SortKeyVal<1>),
       "stable sort of rows by u32 keys, 1-byte values", false},
      {"sort_key_val.2", FJ_GUARDED("sort_key_val.2", SortKeyVal<2>),
       "stable sort of rows by u32 keys, 2-byte values", false},
      {"sort_key_val.4", FJ_GUARDED("sort_key_val.4", SortKeyVal<4>),
       "stable sort of rows by u32 keys, 4-byte values", false},
      {"sort_key_val.8", FJ_GUARDED("sort_key_val.8", SortKeyVal<8>),
       "stable sort of rows by u32 keys, 8-byte values", false},
      FJ_TOP_K("f16", kFloat, 2), FJ_TOP_K("bf16", kFloatCanonicalNaNs, 2),
      FJ_TOP_K("f32", kFloat, 4), FJ_TOP_K("f64", kFloat, 8),
      FJ_TOP_K("s8", kSigned, 1), FJ_TOP_K("s16", kSigned, 2),
      FJ_TOP_K("s32", kSigned, 4), FJ_TOP_K("s64", kSigned, 8),
      FJ_TOP_K("pred", kUnsigned, 1), FJ_TOP_K("u8", kUnsigned, 1),
      FJ_TOP_K("u16", kUnsigned, 2), FJ_TOP_K("u32", kUnsigned, 4),
      FJ_TOP_K("u64", kUnsigned, 8),
      {"testing.fail", FJ_GUARDED("testing.fail", Fail),
       "for tests: (s32 x) -> s32, throws std::bad_alloc if x != 0, else std::runtime_error", false},
  };
  return *calls;
}
#undef FJ_TOP_K
#undef FJ_GUARDED

}  // namespace

const CustomCall* FindCustomCall(const std::string& target) {
  for (const CustomCall& c : Registry()) {
    if (c.target == target) return &c;
  }
  return nullptr;
}

std::vector<std::string> CustomCallTargets() {
  std::vector<std::string> out;
  for (const CustomCall& c : Registry()) out.push_back(c.target);
  return out;
}

}  // namespace fj
