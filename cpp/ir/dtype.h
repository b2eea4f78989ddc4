// Element types of the IR. Storage follows NumPy: pred is one byte (0 or 1); f16 is IEEE
// binary16, bf16 is bfloat16 (the top half of an f32, as the ml_dtypes package stores it).
// Arithmetic on f16 and bf16 happens in f32, rounded back after every operation (the
// low-precision pass rewrites it so, as XLA's float normalization does): kernels only load,
// store, move, select and convert 16-bit floats.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fj {

// New types go at the end: the numbers are part of cache keys and tables indexed by type.
enum class DType : uint8_t { kPred, kS32, kS64, kU32, kU64, kF32, kF64, kS8, kS16, kU8, kU16, kF16, kBF16 };

inline constexpr DType kAllDTypes[] = {DType::kPred, DType::kS8,  DType::kS16, DType::kS32, DType::kS64,
                                       DType::kU8,   DType::kU16, DType::kU32, DType::kU64, DType::kF16,
                                       DType::kBF16, DType::kF32, DType::kF64};
inline constexpr int kNumDTypes = sizeof(kAllDTypes) / sizeof(kAllDTypes[0]);

std::string_view DTypeName(DType t);  // "pred", "s32", ..., "f64"
std::optional<DType> ParseDType(std::string_view name);

int DTypeBytes(DType t);  // storage size: pred 1, s32 4, ...
int DTypeBits(DType t);   // value width: pred 1, s32 32, ...
// f16 and bf16: stored in 16 bits, computed in f32.
inline bool IsLowPrecisionFloat(DType t) { return t == DType::kF16 || t == DType::kBF16; }
inline bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF64 || IsLowPrecisionFloat(t); }
inline bool IsSignedInt(DType t) {
  return t == DType::kS8 || t == DType::kS16 || t == DType::kS32 || t == DType::kS64;
}
inline bool IsUnsignedInt(DType t) {
  return t == DType::kU8 || t == DType::kU16 || t == DType::kU32 || t == DType::kU64;
}
inline bool IsInteger(DType t) { return IsSignedInt(t) || IsUnsignedInt(t); }
inline bool IsPred(DType t) { return t == DType::kPred; }

}  // namespace fj
