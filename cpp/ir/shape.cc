// Shapes (see shape.h).
#include "ir/shape.h"

#include <cstdint>

#include "support/error.h"

namespace fj {

Shape::Shape(DType dtype, std::vector<int64_t> dims)
    : is_tuple_(false), dtype_(dtype), dims_(std::move(dims)) {
  int64_t bytes = DTypeBytes(dtype_);
  for (int64_t d : dims_) {
    if (d < 0) ThrowInvalidArgument("negative dimension in shape ", ToString());
    if (d > 0 && __builtin_mul_overflow(bytes, d, &bytes)) bytes = INT64_MAX;
  }
  if (bytes > (int64_t{1} << 62)) {
    ThrowInvalidArgument("shape ", ToString(), " is too large: its size in bytes overflows");
  }
}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape s;
  s.tuple_ = std::move(elements);
  return s;
}

DType Shape::dtype() const {
  FJ_CHECK(!is_tuple_, "dtype() of tuple shape ", ToString());
  return dtype_;
}

const std::vector<int64_t>& Shape::dims() const {
  FJ_CHECK(!is_tuple_, "dims() of tuple shape ", ToString());
  return dims_;
}

const std::vector<Shape>& Shape::tuple_shapes() const {
  FJ_CHECK(is_tuple_, "tuple_shapes() of array shape ", ToString());
  return tuple_;
}

int64_t CheckedAdd(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) ThrowInvalidArgument(what, ": ", a, " + ", b, " overflows int64");
  return r;
}

int64_t CheckedMul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) ThrowInvalidArgument(what, ": ", a, " * ", b, " overflows int64");
  return r;
}

void CheckArraySize(const Shape& shape, const char* what) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) CheckArraySize(s, what);
    return;
  }
  int64_t bytes = DTypeBytes(shape.dtype());
  for (int64_t d : shape.dims()) {
    if (d < 0) ThrowInvalidArgument(what, ": negative dimension in ", shape.ToString());
    bytes = CheckedMul(bytes, d, what);
  }
}

int64_t Shape::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims()) n *= d;
  return n;
}

int64_t Shape::ByteSize() const {
  if (is_tuple_) {
    int64_t total = 0;
    for (const Shape& s : tuple_) total += s.ByteSize();
    return total;
  }
  return NumElements() * DTypeBytes(dtype_);
}

bool Shape::operator==(const Shape& other) const {
  if (is_tuple_ != other.is_tuple_) return false;
  if (is_tuple_) return tuple_ == other.tuple_;
  return dtype_ == other.dtype_ && dims_ == other.dims_;
}

std::string Shape::ToString() const {
  std::string s;
  if (is_tuple_) {
    s = "(";
    for (size_t i = 0; i < tuple_.size(); ++i) {
      if (i) s += ", ";
      s += tuple_[i].ToString();
    }
    return s + ")";
  }
  s = std::string(DTypeName(dtype_)) + "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "}";
}

}  // namespace fj
