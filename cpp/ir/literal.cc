// Literals (see literal.h).
#include "ir/literal.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "support/error.h"
#include "support/float16.h"

namespace fj {

Literal::Literal(Shape shape) : shape_(std::move(shape)) {
  FJ_CHECK(shape_.IsArray(), "literal of tuple shape");
  storage_.assign((shape_.ByteSize() + 7) / 8 + 1, 0);
}

Literal Literal::Scalar(DType dtype, double value) {
  Literal l(Shape::Scalar(dtype));
  l.SetDouble(0, value);
  return l;
}

Literal Literal::ScalarInt(DType dtype, int64_t value) {
  Literal l(Shape::Scalar(dtype));
  l.SetInt64(0, value);
  return l;
}

double Literal::GetDouble(int64_t i) const {
  const char* p = reinterpret_cast<const char*>(storage_.data());
  switch (dtype()) {
    case DType::kPred: return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::kS8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kS16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kU16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::kF16: return F16ToF32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: return BF16ToF32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kS32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kS64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::kU32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::kU64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::kF32: return reinterpret_cast<const float*>(p)[i];
    case DType::kF64: return reinterpret_cast<const double*>(p)[i];
  }
  return 0;
}

int64_t Literal::GetInt64(int64_t i) const {
  const char* p = reinterpret_cast<const char*>(storage_.data());
  switch (dtype()) {
    case DType::kPred: return reinterpret_cast<const uint8_t*>(p)[i] ? 1 : 0;
    case DType::kS8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kS16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kU16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::kF16: case DType::kBF16: return static_cast<int64_t>(GetDouble(i));
    case DType::kS32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kS64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::kU32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::kU64: return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::kF32: return static_cast<int64_t>(reinterpret_cast<const float*>(p)[i]);
    case DType::kF64: return static_cast<int64_t>(reinterpret_cast<const double*>(p)[i]);
  }
  return 0;
}

uint64_t Literal::GetUint64(int64_t i) const {
  const char* p = reinterpret_cast<const char*>(storage_.data());
  switch (DTypeBytes(dtype())) {
    case 1: return reinterpret_cast<const uint8_t*>(p)[i];
    case 2: return reinterpret_cast<const uint16_t*>(p)[i];
    case 4: return reinterpret_cast<const uint32_t*>(p)[i];
    default: return reinterpret_cast<const uint64_t*>(p)[i];
  }
}

void Literal::SetDouble(int64_t i, double v) {
  char* p = reinterpret_cast<char*>(storage_.data());
  switch (dtype()) {
    case DType::kPred: reinterpret_cast<uint8_t*>(p)[i] = v != 0.0; break;
    case DType::kS8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DType::kS16: reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case DType::kU8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DType::kU16: reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case DType::kF16: reinterpret_cast<uint16_t*>(p)[i] = F64ToF16(v); break;
    case DType::kBF16: reinterpret_cast<uint16_t*>(p)[i] = F64ToBF16(v); break;
    case DType::kS32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kS64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kU32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case DType::kU64: reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); break;
    case DType::kF32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF64: reinterpret_cast<double*>(p)[i] = v; break;
  }
}

void Literal::SetInt64(int64_t i, int64_t v) {
  if (IsFloat(dtype())) {
    SetDouble(i, static_cast<double>(v));
  } else if (IsPred(dtype())) {
    SetUint64(i, v != 0);
  } else {
    SetUint64(i, static_cast<uint64_t>(v));
  }
}

void Literal::SetUint64(int64_t i, uint64_t v) {
  char* p = reinterpret_cast<char*>(storage_.data());
  switch (DTypeBytes(dtype())) {
    case 1: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case 2: reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case 4: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    default: reinterpret_cast<uint64_t*>(p)[i] = v; break;
  }
}

bool Literal::IsAll(double value) const {
  for (int64_t i = 0; i < num_elements(); ++i) {
    if (IsFloat(dtype())) {
      if (!(GetDouble(i) == value)) return false;
    } else {
      if (static_cast<double>(GetInt64(i)) != value) return false;
      if (IsUnsignedInt(dtype()) && value < 0) return false;
    }
  }
  return true;
}

bool Literal::IsSplat() const {
  for (int64_t i = 1; i < num_elements(); ++i) {
    if (GetUint64(i) != GetUint64(0)) return false;
  }
  return true;
}

bool Literal::operator==(const Literal& other) const {
  return shape_ == other.shape_ &&
         std::memcmp(storage_.data(), other.storage_.data(), byte_size()) == 0;
}

size_t Literal::Hash() const {
  // Word by word (the storage's padding past byte_size() is zero): CSE hashes every
  // constant on every run, and a constant can be megabytes of closed-over weights.
  size_t h = std::hash<std::string>()(shape_.ToString());
  for (uint64_t w : storage_) h = (h ^ w) * 1099511628211ull;
  return h;
}

std::string Literal::FormatElement(DType dtype, double d, int64_t s, uint64_t u) {
  if (IsPred(dtype)) return u ? "true" : "false";
  if (IsSignedInt(dtype)) return std::to_string(s);
  if (IsUnsignedInt(dtype)) return std::to_string(u);
  if (std::isnan(d)) {
    // The default quiet NaN prints as "nan"; any other (a payload, the sign bit) by its
    // bits, so that the text form stays exact (the parser reads both).
    uint64_t quiet = dtype == DType::kF64   ? 0x7ff8000000000000ull
                     : dtype == DType::kF32 ? 0x7fc00000ull
                     : dtype == DType::kF16 ? 0x7e00ull
                                            : 0x7fc0ull;  // bf16
    if (u == quiet) return "nan";
    char bits[32];
    std::snprintf(bits, sizeof(bits), "nan_0x%llx", static_cast<unsigned long long>(u));
    return bits;
  }
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  std::to_chars_result r = dtype != DType::kF64
                               ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(d))
                               : std::to_chars(buf, buf + sizeof(buf), d);
  return std::string(buf, r.ptr);
}

std::string Literal::ElementToString(int64_t i) const {
  return FormatElement(dtype(), GetDouble(i), GetInt64(i), GetUint64(i));
}

std::string Literal::ToString() const {
  const std::vector<int64_t>& dims = shape_.dims();
  if (dims.empty()) return ElementToString(0);
  std::string out;
  std::vector<int64_t> strides = RowMajorStrides(dims);
  // Recursive nesting of braces, one level per dimension.
  std::function<void(int, int64_t)> emit = [&](int d, int64_t offset) {
    out += "{";
    for (int64_t i = 0; i < dims[d]; ++i) {
      if (i) out += ", ";
      if (d + 1 == static_cast<int>(dims.size())) {
        out += ElementToString(offset + i);
      } else {
        emit(d + 1, offset + i * strides[d]);
      }
    }
    out += "}";
  };
  emit(0, 0);
  return out;
}

}  // namespace fj
