// Element types of the IR. Storage follows NumPy: pred is one byte (0 or 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fj {

enum class DType : uint8_t { kPred, kS32, kS64, kU32, kU64, kF32, kF64 };

inline constexpr DType kAllDTypes[] = {DType::kPred, DType::kS32, DType::kS64, DType::kU32,
                                       DType::kU64,  DType::kF32, DType::kF64};

std::string_view DTypeName(DType t);  // "pred", "s32", ..., "f64"
std::optional<DType> ParseDType(std::string_view name);

int DTypeBytes(DType t);  // storage size: pred 1, s32 4, ...
int DTypeBits(DType t);   // value width: pred 1, s32 32, ...
inline bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF64; }
inline bool IsSignedInt(DType t) { return t == DType::kS32 || t == DType::kS64; }
inline bool IsUnsignedInt(DType t) { return t == DType::kU32 || t == DType::kU64; }
inline bool IsInteger(DType t) { return IsSignedInt(t) || IsUnsignedInt(t); }
inline bool IsPred(DType t) { return t == DType::kPred; }

}  // namespace fj
