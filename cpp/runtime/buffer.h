// Buffer: one array's elements, in 64-byte aligned host memory or in a device's memory.
// Arrays are immutable once computed, so a buffer keeps the copies it is asked for: the
// host's copy of device memory (for NumPy) and a device's copy of host memory (an input
// passed to a GPU program again and again is copied once).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "runtime/device.h"

namespace fj {

class Buffer : public std::enable_shared_from_this<Buffer> {
 public:
  // Host buffers start at a multiple of this: generated code and program copies assume it.
  static constexpr size_t kAlignment = 64;
  // Host memory. Throws fj::Error if it cannot be allocated.
  static std::shared_ptr<Buffer> Allocate(int64_t bytes);
  // Memory on `device` (host memory when it is null).
  static std::shared_ptr<Buffer> AllocateOn(const std::shared_ptr<Device>& device, int64_t bytes);
  // Host memory someone else owns (a DLPack import: zero copy); `release` runs when the
  // buffer is destroyed. `data` must be kAlignment-aligned, as the buffers Allocate makes.
  static std::shared_ptr<Buffer> Wrap(void* data, int64_t bytes, std::function<void()> release);
  // Makes the process's cache of freed blocks (and its fork handlers) now: the extension
  // calls it at import, so that no thread is making it when another forks.
  static void InitializeCache();
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // The elements' address: in host memory, or on the device.
  void* data() const { return data_; }
  int64_t size() const { return size_; }
  // The device holding the elements; null for host memory.
  Device* device() const { return device_.get(); }
  const std::shared_ptr<Device>& device_ref() const { return device_; }

  // Host memory of its own (not wrapped, not a device's): a program may change it in
  // place once its owner gives it up (a donation).
  bool OwnsHostMemory() const { return !device_ && !release_; }
  // Forgets the copies kept of the elements (before a donated buffer's elements change).
  void DropCopies();

  // The elements readable by the host: data(), or a host copy of device memory (fetched
  // on first use, waiting for the work that computes them).
  const void* HostData() const;
  // This buffer's elements on `device` (the host when null): itself, or a copy made on
  // first use and kept.
  std::shared_ptr<Buffer> On(const std::shared_ptr<Device>& device) const;

 private:
  Buffer(void* data, int64_t size, std::shared_ptr<Device> device)
      : data_(data), size_(size), device_(std::move(device)) {}
  void* data_;
  int64_t size_;
  std::shared_ptr<Device> device_;
  mutable std::mutex copies_mu_;
  mutable std::shared_ptr<Buffer> host_copy_;
  mutable std::shared_ptr<Buffer> device_copy_;
  std::function<void()> release_;  // for wrapped memory
};

}  // namespace fj
