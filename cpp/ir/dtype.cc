// Element type names and sizes.
#include "ir/dtype.h"

namespace fj {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kPred: return "pred";
    case DType::kS8: return "s8";
    case DType::kS16: return "s16";
    case DType::kS32: return "s32";
    case DType::kS64: return "s64";
    case DType::kU8: return "u8";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (DTypeName(t) == name) return t;
  }
  return std::nullopt;
}

int DTypeBytes(DType t) {
  switch (t) {
    case DType::kPred: case DType::kS8: case DType::kU8: return 1;
    case DType::kS16: case DType::kU16: case DType::kF16: case DType::kBF16: return 2;
    case DType::kS32: case DType::kU32: case DType::kF32: return 4;
    case DType::kS64: case DType::kU64: case DType::kF64: return 8;
  }
  return 0;
}

int DTypeBits(DType t) { return t == DType::kPred ? 1 : 8 * DTypeBytes(t); }

}  // namespace fj
