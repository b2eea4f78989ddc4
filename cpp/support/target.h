// The machine a program is compiled for: which backend generates its code and the figures
// that the passes, the cost model and codegen need from it. Everything that differed between
// the CPU and the GPU as constants scattered through the compiler lives here.
#pragma once

#include <cstdint>
#include <string>

namespace fj {

enum class Backend {
  kCpu,          // native code for the host through LLVM's ORC JIT
  kGpu,          // PTX through LLVM's NVPTX target, run by the CUDA driver
  kGpuEmulated,  // the GPU's kernels and program, run on the host (verification)
};

// "cpu", "gpu", "gpu_emulated".
const char* BackendName(Backend b);
// Parses a backend name; throws fj::Error(kInvalidArgument) naming the choices.
Backend ParseBackend(const std::string& name);

// Reductions with few outputs over many elements are split in two (TreeReductionPass): the
// parallel units a kernel should have and the blocks it may be split into.
struct TreeReductionLimits {
  int64_t block_elements = 32768;  // at least this many elements per block
  int64_t min_block_rows = 8;      // and this many reduced elements per output
  int64_t max_blocks = 64;
  int64_t enough_units = 32;   // a reduction with this many parallel units is left alone
  int64_t column_group = 64;   // outputs of a column reduction one unit computes
};

struct Target {
  Backend backend = Backend::kCpu;
  // Lanes a kernel's innermost loop steps together: the host's SIMD width in 32-bit lanes
  // on the CPU; 1 on the GPU, where a thread computes one element.
  int vector_lanes = 8;
  // A row-fused kernel keeps a costly per-element value of the row it walks in a stack
  // buffer of at most this many bytes (0: it computes the value again where it is read).
  int64_t max_kept_row_bytes = 64 * 1024;
  TreeReductionLimits tree;
  // Cost model figures (only their ratios matter): sustained memory bandwidth, lane-ops
  // per microsecond, and the cost of one kernel launch from the program.
  double bytes_per_us = 40e3;
  double flops_per_us = 60e3;
  double launch_us = 0.5;
  // A whole-loop kernel's per-step reductions: partial results per block of this many
  // lanes (a multiple of 16; on the GPU a warp, combined with shuffles).
  int64_t whole_loop_block_lanes = 0;  // 0: as many as the fusion pass chooses
  // GPU code: the PTX target ("sm_80", "sm_90") and ISA version (0: chosen for the
  // toolkit and driver at hand).
  std::string gpu_arch = "sm_80";
  int ptx_version = 0;

  bool is_gpu() const { return backend != Backend::kCpu; }
  // The target of a backend with this machine's figures (`cpu_lanes` for the CPU).
  static Target For(Backend backend, int cpu_lanes = 8);
  // What distinguishes compilations for this target (part of compilation cache keys).
  std::string Key() const;
};

// Threads of a GPU warp; lanes of a warp cooperate in reductions (shuffles).
constexpr int kWarpSize = 32;

}  // namespace fj
