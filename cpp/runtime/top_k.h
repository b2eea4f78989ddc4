// The runtime's top-k kernel (the custom calls "top_k.<dtype>", registered in
// custom_calls.cc): per row, the positions of the k first elements in jax.lax.top_k's order.
#pragma once

#include <cstdint>

namespace fj {

// How a dtype's bits order, as jax.lax.top_k orders its values on the CPU: IEEE floats by
// their total order (f16, f32, f64); bf16 by it with every NaN taken as its sign's quiet
// canonical NaN (XLA:CPU's bf16 top_k: NaNs of one sign are equal, by position);
// two's-complement integers; unsigned integers (pred as 0 and 1).
enum class TopKOrder { kFloat, kFloatCanonicalNaNs, kSigned, kUnsigned };

// Kernel ABI: buffers = {indices s32 [rows, k]; x [rows, n] of `kBytes`-byte elements,
// n (s64 scalar), k (s64 scalar)}; units are the elements of the indices. Each row's indices
// are those of its k first elements, largest first (floats: +NaN, larger payload first, >
// +inf > ... > +0.0 > -0.0 > ... > -inf > -NaN, as XLA's TopK), equal elements by the lower
// index first. A row belongs to the range that holds its first index, so any split of the
// units gives each row to exactly one caller: results do not depend on the thread count.
// Throws std::length_error for rows of 2^31 elements or more.
template <TopKOrder kOrder, int kBytes>
void TopK(void** buffers, int64_t begin, int64_t end);

}  // namespace fj
