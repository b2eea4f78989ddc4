// The first CUDA GPU as a GpuDevice: its primary context, one stream that runs everything
// in order, a caching allocator, and modules loaded from PTX (compiled by the driver).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_driver.h"
#include "runtime/gpu/gpu_device.h"

namespace fj {

class CudaDevice final : public GpuDevice {
 public:
  // Device 0, opened once. Throws fj::Error(kUnavailable) saying why there is none.
  static std::shared_ptr<CudaDevice> Get();
  // "" when a GPU can be used, else why not.
  static std::string UnavailableReason();

  std::string Describe() const override;
  void* Allocate(int64_t bytes) override;
  void Free(void* ptr, int64_t bytes) override;
  void CopyToDevice(void* dst, const void* src, int64_t bytes) override;
  void CopyToHost(void* dst, const void* src, int64_t bytes) override;
  void Synchronize() override;
  std::unique_ptr<GpuModule> Load(const GpuCode& code) override;
  void CopyOnDevice(void* dst, const void* src, int64_t bytes) override;
  std::string Arch() const override { return "sm_" + std::to_string(compute_capability_); }
  int MaxPtxVersion() const override;
  int Multiprocessors() const override { return multiprocessors_; }

  const cuda::Driver& driver() const { return d_; }
  cuda::CUstream stream() const { return stream_; }
  // Makes the device's context current on the calling thread.
  void Enter() const;

  CudaDevice(const cuda::Driver& driver, int ordinal);

 private:
  const cuda::Driver& d_;
  cuda::CUdevice device_ = 0;
  cuda::CUcontext context_ = nullptr;
  cuda::CUstream stream_ = nullptr;
  std::string name_;
  int compute_capability_ = 0;  // 90 for 9.0
  int multiprocessors_ = 1;
  int driver_version_ = 0;  // 12040 for 12.4
  size_t total_bytes_ = 0;
  // Freed blocks by rounded size, given back to the driver when an allocation fails.
  std::mutex mu_;
  std::map<size_t, std::vector<cuda::CUdeviceptr>> free_;
  size_t cached_bytes_ = 0;
  size_t used_bytes_ = 0;
  void ReleaseCached();
};

}  // namespace fj
