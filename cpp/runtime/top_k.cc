// The top-k kernel (see top_k.h): one pass over each row keeping the k best in a heap, or
// for large k a selection and a sort of the k first.
#include "runtime/top_k.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace fj {
namespace {

template <int kBytes>
using BitsOf = std::conditional_t<kBytes == 1, uint8_t,
               std::conditional_t<kBytes == 2, uint16_t,
               std::conditional_t<kBytes == 4, uint32_t, uint64_t>>>;

// An element's key and position in one integer, so that comparing the integers compares
// keys first and positions second: the order is total and every element distinct.
template <typename Bits>
using PackedOf = std::conditional_t<sizeof(Bits) <= 4, uint64_t, unsigned __int128>;

// The element's key as an unsigned integer of its width that is smaller the earlier the
// element comes in top_k's order (the order descending).
template <TopKOrder kOrder, typename Bits>
inline Bits DescendingKey(Bits b) {
  constexpr int kBits = 8 * sizeof(Bits);
  constexpr Bits kMagnitude = static_cast<Bits>(static_cast<Bits>(~Bits{0}) >> 1);
  if constexpr (kOrder == TopKOrder::kUnsigned) {
    return static_cast<Bits>(~b);
  } else if constexpr (kOrder == TopKOrder::kSigned) {
    return static_cast<Bits>(b ^ kMagnitude);  // ~(b ^ sign bit): the largest first
  } else {
    if constexpr (kOrder == TopKOrder::kFloatCanonicalNaNs) {
      static_assert(sizeof(Bits) == 2, "canonical NaNs are bf16's");
      // A NaN (exponent all ones, mantissa not zero) as 0x7fc0 with its sign.
      b = (b & 0x7fff) > 0x7f80 ? static_cast<Bits>((b & 0x8000) | 0x7fc0) : b;
    }
    // The total order of IEEE bits, descending: a positive value's magnitude bits flipped
    // (the largest, +NaN's of the largest payload, first), a negative value's kept (-0.0
    // first, -NaN's last). Without a branch, so that the blocks' test below vectorises.
    Bits positive = static_cast<Bits>((b >> (kBits - 1)) - 1);  // all ones where the sign is 0
    return static_cast<Bits>(b ^ (positive & kMagnitude));
  }
}

template <typename Packed>
inline Packed Pack(uint64_t key, int64_t position) {
  return (Packed{key} << 32) | static_cast<Packed>(position);
}

// The k first of the elements offered, in order, when k is small: sorted in place (few
// to move), or in a max-heap. worst() is the one an element must come before to enter.
template <typename Packed>
class Best {
 public:
  // Starts with the `k` (> 0) packed elements at `first`, which it keeps and reorders.
  Best(Packed* first, int64_t k) : b_(first), k_(k), sorted_(k <= kMaxSorted) {
    if (sorted_) {
      std::sort(b_, b_ + k_);
    } else {
      std::make_heap(b_, b_ + k_);
    }
  }
  Packed worst() const { return sorted_ ? b_[k_ - 1] : b_[0]; }
  // Replaces worst() with `p`, which comes before it.
  void Replace(Packed p) {
    int64_t hole = sorted_ ? k_ - 1 : 0;
    if (sorted_) {
      for (; hole > 0 && b_[hole - 1] > p; --hole) b_[hole] = b_[hole - 1];
    } else {
      // One sift down from the root (a pop and a push cost two).
      for (int64_t child = 1; child < k_; child = 2 * hole + 1) {
        if (child + 1 < k_ && b_[child + 1] > b_[child]) ++child;
        if (b_[child] <= p) break;
        b_[hole] = b_[child];
        hole = child;
      }
    }
    b_[hole] = p;
  }
  // Leaves them in order at `first`.
  void Finish() {
    if (!sorted_) std::sort_heap(b_, b_ + k_);
  }

 private:
  // Up to this many, a sorted array: an insertion moves a few elements where a heap's sift
  // mispredicts its branches (rows of 1,000, k = 10: 25% faster).
  static constexpr int64_t kMaxSorted = 16;
  Packed* b_;
  int64_t k_;
  bool sorted_;
};

// The positions of the k first of `x[0, n)`, in order, into out[0, k); 0 < k <= n.
// Inlined into each of TopK's compilations for its vectors.
template <TopKOrder kOrder, typename Bits>
__attribute__((always_inline)) inline void TopKRow(const Bits* x, int64_t n, int64_t k, int32_t* out,
                                                   std::vector<PackedOf<Bits>>& scratch) {
  using Packed = PackedOf<Bits>;
  if (k * 8 >= n) {
    // Many of the row: select the k first of all (linear), then sort them.
    scratch.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) scratch[i] = Pack<Packed>(DescendingKey<kOrder>(x[i]), i);
    if (k < n) std::nth_element(scratch.begin(), scratch.begin() + k, scratch.end());
    std::sort(scratch.begin(), scratch.begin() + k);
  } else {
    // Few: one pass keeping the k first so far. Elements come in position order, so one
    // whose key equals the worst kept one's comes after it: only a smaller key enters. A
    // block of elements with none (most, once the k kept are good) costs a vectorised min.
    scratch.resize(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) scratch[i] = Pack<Packed>(DescendingKey<kOrder>(x[i]), i);
    Best<Packed> best(scratch.data(), k);
    Bits threshold = static_cast<Bits>(best.worst() >> 32);
    auto offer = [&](int64_t i) {
      Bits key = DescendingKey<kOrder>(x[i]);
      if (key >= threshold) return;
      best.Replace(Pack<Packed>(key, i));
      threshold = static_cast<Bits>(best.worst() >> 32);
    };
    constexpr int64_t kBlock = 32;
    int64_t i = k;
    for (; i + kBlock <= n; i += kBlock) {
      Bits lowest = static_cast<Bits>(~Bits{0});
      for (int64_t j = i; j < i + kBlock; ++j) lowest = std::min(lowest, DescendingKey<kOrder>(x[j]));
      if (lowest >= threshold) continue;
      for (int64_t j = i; j < i + kBlock; ++j) offer(j);
    }
    for (; i < n; ++i) offer(i);
    best.Finish();
  }
  for (int64_t i = 0; i < k; ++i) out[i] = static_cast<int32_t>(static_cast<uint32_t>(scratch[i]));
}

}  // namespace

// Compiled for AVX-512 and AVX2 too (chosen at load time): the blocks' min runs 4-6x as
// fast in their vectors as in SSE2's (rows of 32,000, k = 1 to 50).
template <TopKOrder kOrder, int kBytes>
__attribute__((target_clones("avx512f", "avx2", "default")))
void TopK(void** buffers, int64_t begin, int64_t end) {
  using Bits = BitsOf<kBytes>;
  int32_t* out = static_cast<int32_t*>(buffers[0]);
  const Bits* x = static_cast<const Bits*>(buffers[1]);
  int64_t n = *static_cast<const int64_t*>(buffers[2]);
  int64_t k = *static_cast<const int64_t*>(buffers[3]);
  if (k <= 0 || n < k) return;
  if (n > INT32_MAX) throw std::length_error("top_k: rows of 2^31 elements or more");
  std::vector<PackedOf<Bits>> scratch;
  // The rows whose first index lies in [begin, end).
  for (int64_t row = (begin + k - 1) / k; row * k < end; ++row) {
    TopKRow<kOrder>(x + row * n, n, k, out + row * k, scratch);
  }
}

template void TopK<TopKOrder::kFloat, 2>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kFloat, 4>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kFloat, 8>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kFloatCanonicalNaNs, 2>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kSigned, 1>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kSigned, 2>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kSigned, 4>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kSigned, 8>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kUnsigned, 1>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kUnsigned, 2>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kUnsigned, 4>(void**, int64_t, int64_t);
template void TopK<TopKOrder::kUnsigned, 8>(void**, int64_t, int64_t);

}  // namespace fj
