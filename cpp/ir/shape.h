// Shapes: an element type with row-major dimensions, or a tuple of shapes (loop state,
// multi-output fusions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace fj {

class Shape {
 public:
  Shape() = default;  // an empty tuple
  Shape(DType dtype, std::vector<int64_t> dims);
  static Shape Tuple(std::vector<Shape> elements);
  static Shape Scalar(DType dtype) { return Shape(dtype, {}); }

  bool IsTuple() const { return is_tuple_; }
  bool IsArray() const { return !is_tuple_; }
  // Array shapes only.
  DType dtype() const;
  const std::vector<int64_t>& dims() const;
  int64_t dim(int i) const { return dims()[i]; }
  int rank() const { return static_cast<int>(dims().size()); }
  bool IsScalar() const { return IsArray() && dims_.empty(); }
  int64_t NumElements() const;
  int64_t ByteSize() const;  // arrays: elements * dtype bytes
  // Tuple shapes only.
  const std::vector<Shape>& tuple_shapes() const;
  const Shape& tuple_shape(int i) const { return tuple_shapes()[i]; }

  Shape WithDType(DType dtype) const { return Shape(dtype, dims()); }
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  bool SameDims(const Shape& other) const { return IsArray() && other.IsArray() && dims_ == other.dims_; }
  std::string ToString() const;  // "f32[4,3]", "(f32[], s32[2])"

 private:
  bool is_tuple_ = true;
  DType dtype_ = DType::kF32;
  std::vector<int64_t> dims_;
  std::vector<Shape> tuple_;
};

// Dimension arithmetic that cannot overflow silently: throws fj::Error(kInvalidArgument)
// naming `what` when the exact result does not fit in int64.
int64_t CheckedAdd(int64_t a, int64_t b, const char* what);
int64_t CheckedMul(int64_t a, int64_t b, const char* what);
// Throws if an array of `shape` has more bytes than int64 can count.
void CheckArraySize(const Shape& shape, const char* what);

// Row-major strides in elements.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);
std::string DimsToString(const std::vector<int64_t>& dims);  // "{1,2}"

}  // namespace fj
