// Literal: the value of a constant, an array in row-major order (also used by constant
// folding). Elements are read and written through double / int64 / uint64 views.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/shape.h"

namespace fj {

class Literal {
 public:
  explicit Literal(Shape shape);  // zero-filled; shape must be an array
  static Literal Scalar(DType dtype, double value);
  static Literal ScalarInt(DType dtype, int64_t value);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return shape_.dtype(); }
  int64_t num_elements() const { return shape_.NumElements(); }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }
  int64_t byte_size() const { return shape_.ByteSize(); }

  // Element views. Floats convert with C++ rules; reading an integer through GetDouble is
  // exact up to 2^53.
  double GetDouble(int64_t i) const;
  int64_t GetInt64(int64_t i) const;   // signed view (u64 reinterpreted)
  uint64_t GetUint64(int64_t i) const;  // raw bits, zero-extended
  bool GetBool(int64_t i) const { return GetUint64(i) != 0; }
  void SetDouble(int64_t i, double v);
  void SetInt64(int64_t i, int64_t v);
  void SetUint64(int64_t i, uint64_t v);  // raw bits, truncated to the element width

  // True if every element equals `value` (exactly; -0.0 == 0.0, NaN never).
  bool IsAll(double value) const;
  bool IsSplat() const;  // all elements bitwise equal (true for size 0 and 1)
  bool operator==(const Literal& other) const;  // bitwise
  size_t Hash() const;

  // "1.5" for scalars, "{1, 2, 3}" / "{{1, 2}, {3, 4}}" for arrays. Floats print so that
  // they parse back exactly ("inf", "-inf", "nan").
  std::string ToString() const;
  static std::string FormatElement(DType dtype, double d, int64_t s, uint64_t u);
  std::string ElementToString(int64_t i) const;

 private:
  Shape shape_;
  std::vector<uint64_t> storage_;  // 8-byte aligned
};

}  // namespace fj
