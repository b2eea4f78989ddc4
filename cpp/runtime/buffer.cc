// Aligned host buffers.
#include "runtime/buffer.h"

#include <cstdlib>

#include "support/error.h"

namespace fj {

std::shared_ptr<Buffer> Buffer::Allocate(int64_t bytes) {
  if (bytes < 0) ThrowInvalidArgument("negative buffer size");
  size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) ThrowInvalidArgument("out of memory allocating ", bytes, " bytes");
  return std::shared_ptr<Buffer>(new Buffer(p, bytes));
}

Buffer::~Buffer() { std::free(data_); }

}  // namespace fj
