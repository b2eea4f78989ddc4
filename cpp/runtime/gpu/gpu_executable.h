// A GPU program: its host side (native code calling the GPU runtime through
// FjGpuRuntimeApi: launches, copies, a read of each loop condition) and its kernels, loaded
// on the device at the first run, so that compiling needs no GPU. Runs on the CUDA device,
// or on the host emulation for Backend::kGpuEmulated.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/executable.h"
#include "runtime/gpu/gpu_device.h"

namespace fj {

// A custom call with no GPU form: run on the host, its buffers copied there and back.
struct HostCustomCall {
  std::string target;
  FjKernelFn fn = nullptr;
  std::vector<int64_t> buffer_bytes;  // outputs, then operands
  int num_outputs = 1;
};

struct GpuProgram {
  FjGpuEntryFn entry = nullptr;
  std::shared_ptr<void> host_code;  // owns the host side (and emulated kernels)
  GpuCode code;
  std::vector<std::vector<uint8_t>> constants;  // array constants the program reads as buffers
  std::vector<HostCustomCall> host_calls;
};

class GpuExecutable final : public Executable {
 public:
  GpuExecutable(Backend backend, GpuProgram program, std::vector<Shape> parameters, std::vector<Shape> outputs,
                int64_t temp_bytes, std::vector<KernelInfo> kernels, std::vector<LoopInfo> loops);
  // The device (acquired at the first use; throws fj::Error when there is none).
  std::shared_ptr<Device> device() const override;
  std::vector<std::shared_ptr<Buffer>> Run(const std::vector<Argument>& args) const override;
  using Executable::Run;
  const GpuCode& code() const { return program_.code; }

 private:
  struct Loaded {
    std::shared_ptr<GpuDevice> device;
    std::unique_ptr<GpuModule> module;
    std::vector<std::shared_ptr<Buffer>> constants;
    std::vector<void*> constant_ptrs;
  };
  const Loaded& Load() const;

  GpuProgram program_;
  mutable std::mutex load_mu_;
  mutable std::unique_ptr<Loaded> loaded_;
};

// The GPU device of `backend` (kGpu: the first CUDA device; kGpuEmulated: the emulation),
// opened once. Throws fj::Error(kInvalidArgument) naming why when there is none.
std::shared_ptr<GpuDevice> GetGpuDevice(Backend backend);
// Whether a CUDA GPU can be used, and if not, why ("" when it can).
std::string GpuUnavailableReason();

}  // namespace fj
