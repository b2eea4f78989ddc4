// The GPU emulated on the host (Backend::kGpuEmulated): device memory is host memory, and a
// launch runs the kernel's threads - the same kernel logic as the PTX, compiled for the
// host - block by block and warp by warp on the calling thread. Threads read their indices
// through EmulatorSpecialRegister; warps whose threads exchange values (shuffles) run their
// 32 threads as fibers that all meet at each exchange, so a shuffle a lane skips is an
// error here, as it would hang or be undefined on a GPU.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/gpu/gpu_device.h"

namespace fj {

class EmulatedDevice final : public GpuDevice {
 public:
  static std::shared_ptr<EmulatedDevice> Get();

  std::string Describe() const override;
  void* Allocate(int64_t bytes) override;
  void Free(void* ptr, int64_t bytes) override;
  void CopyToDevice(void* dst, const void* src, int64_t bytes) override;
  void CopyToHost(void* dst, const void* src, int64_t bytes) override;
  void Synchronize() override {}
  std::unique_ptr<GpuModule> Load(const GpuCode& code) override;
  void CopyOnDevice(void* dst, const void* src, int64_t bytes) override;
  std::string Arch() const override { return "sm_80"; }
  int MaxPtxVersion() const override { return 0; }
  // A small GPU: launches choose few blocks, so that the kernels' grid-stride loops run.
  int Multiprocessors() const override { return 2; }
};

// What emulated kernels call, by address (EmulatorEntryPoints).
enum class SpecialRegister : int32_t { kTidX = 0, kNtidX = 1, kCtaidX = 2, kNctaidX = 3 };
struct EmulatorEntryPoints {
  int32_t (*special_register)(int32_t which);
  // The 32-bit value of the lane `lane ^ mask` of the calling thread's warp.
  int32_t (*shuffle_xor)(int32_t value, int32_t mask);
};
const EmulatorEntryPoints& GetEmulatorEntryPoints();

}  // namespace fj
