// A device: memory that is not the host's, and a queue of work on it. Buffers on a device
// hold it alive; the CUDA device (runtime/gpu/cuda_device.h) and its host emulation
// (runtime/gpu/emulated_device.h) implement it.
#pragma once

#include <cstdint>
#include <string>

namespace fj {

class Device {
 public:
  virtual ~Device() = default;
  // "gpu:0 (NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB)".
  virtual std::string Describe() const = 0;
  // Device memory of `bytes` bytes (aligned to 256). Throws fj::Error(kResourceExhausted)
  // when the device is out of memory.
  virtual void* Allocate(int64_t bytes) = 0;
  virtual void Free(void* ptr, int64_t bytes) = 0;
  // Host -> device; ordered with the device's work (the host memory may be reused on return).
  virtual void CopyToDevice(void* dst, const void* src, int64_t bytes) = 0;
  // Device -> host; waits for the work queued before it.
  virtual void CopyToHost(void* dst, const void* src, int64_t bytes) = 0;
  // Waits until all queued work is done; raises the first error it reported.
  virtual void Synchronize() = 0;
};

}  // namespace fj
