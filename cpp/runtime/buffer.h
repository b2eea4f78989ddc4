// Buffer: a 64-byte aligned block of host memory holding one array's elements.
#pragma once

#include <cstdint>
#include <memory>

namespace fj {

class Buffer {
 public:
  // Throws fj::Error if the memory cannot be allocated.
  static std::shared_ptr<Buffer> Allocate(int64_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  Buffer(void* data, int64_t size) : data_(data), size_(size) {}
  void* data_;
  int64_t size_;
};

}  // namespace fj
