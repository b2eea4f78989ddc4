// The GPU as the runtime sees it: a device (memory, a stream) that loads a program's kernels
// and launches them. The CUDA device (runtime/cuda/) and the host emulation
// (emulated_device.h) implement it; GpuExecutable runs programs on either.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace fj {

// How a kernel of a GPU program is launched.
struct GpuKernelSpec {
  std::string name;       // the PTX entry
  int num_buffers = 0;    // its parameters: one device pointer each
  // Threads that take each iteration unit together: 1, or a warp (32) whose lanes
  // cooperate (warp shuffles) on a unit.
  int threads_per_unit = 1;
  // Whether its threads exchange values (shuffles): the emulation then runs the threads of
  // a warp as fibers that meet at each exchange.
  bool warp_sync = false;
};

// A kernel compiled for the host (the emulation): args[i] points at argument i.
using HostKernelFn = void (*)(void* const* args);

// A program's kernels as a device loads them.
struct GpuCode {
  std::string ptx;  // the GPU: one PTX module holding every kernel
  std::vector<GpuKernelSpec> kernels;
  // The emulation: each kernel compiled for the host, and what owns that code.
  std::vector<HostKernelFn> host_kernels;
  std::shared_ptr<void> host_code;
};

// A program's kernels loaded on a device.
class GpuModule {
 public:
  virtual ~GpuModule() = default;
  // Queues kernel `kernel` over `units` iteration units on the device's stream; `buffers`
  // holds its device pointers. Throws fj::Error when the launch fails.
  virtual void Launch(int kernel, void* const* buffers, int64_t units) = 0;
};

class GpuDevice : public Device {
 public:
  virtual std::unique_ptr<GpuModule> Load(const GpuCode& code) = 0;
  // Device-to-device copy, ordered with the launches.
  virtual void CopyOnDevice(void* dst, const void* src, int64_t bytes) = 0;
  // The PTX target its kernels are compiled for ("sm_90") and the highest PTX ISA version
  // its driver accepts (e.g. 90 for 9.0; 0 when that does not matter: the emulation).
  virtual std::string Arch() const = 0;
  virtual int MaxPtxVersion() const = 0;
  virtual int Multiprocessors() const = 0;
};

// Threads per block and blocks for `threads` threads on a device with `multiprocessors`
// SMs: blocks of up to 256 threads (whole warps), spread over the SMs when there are few
// threads, at most one resident wave of blocks (kernels stride over the rest).
struct LaunchDims {
  int64_t blocks = 1;
  int threads = 32;
};
LaunchDims ChooseLaunchDims(int64_t threads, int multiprocessors);

}  // namespace fj
