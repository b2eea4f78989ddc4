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
  // Cost model figures for a kernel that runs on all of the machine's threads: memory
  // bandwidth while the bytes a kernel moves fit in the last-level cache (`cache_bytes`,
  // the bytes read and written: half the cache, Target::For), and from twice that on, where
  // streaming evicts what was cached and every byte moves at memory's bandwidth (between
  // the two the time interpolates). Measured on a Zen 4 VM (x + 1, benchmarks/cost_model.py):
  // 110-180 GB/s up to 16 MB moved, 28-47 GB/s from 32 MB on (the earlier model, the first
  // 32 MB at cache speed and the rest at 45 GB/s, was 2-5x optimistic there); lane-ops (see ElementCost) per microsecond; the cost of one kernel launch
  // from the program. A kernel with less work than `parallel_min_work` element steps and
  // fewer than `parallel_min_lane_ops` lane-ops runs on the calling thread alone,
  // `serial_slowdown` times slower (RunsInParallel, analysis/cost_model.h). The CPU's are measured on
  // a 2-core x86-64 (benchmarks/cost_model.py prints the estimates against measured times);
  // lane-ops scale with the vector width (less where the vectors are wider than their
  // units: Target::For). They do not follow the thread count, so that fusion decisions
  // (and the results' bits) do not depend on it.
  double bytes_per_us = 170e3;
  double dram_bytes_per_us = 35e3;
  double cache_bytes = 16.0 * 1024 * 1024;
  double flops_per_us = 7.8e3 * 8;
  // Lane-ops per microsecond in a whole-loop kernel, whose state stays in registers from
  // step to step: no loads or stores between its ops, which run `whole_loop_register_gain`
  // times as fast as in a kernel over arrays (the CartPole rollouts, 8 lanes and 16:
  // benchmarks/cost_model.py), and so do the values its lanes share, computed one element at
  // a time. Vectors wider than their units gain nothing there (Zen 4: 16 lanes no faster
  // than 8).
  double whole_loop_register_gain = 2.25;
  double whole_loop_flops_per_us = 7.8e3 * 8 * whole_loop_register_gain;
  // Lane-ops computed one element at a time (in no vector): as many instructions as vectors
  // of any width would take.
  double scalar_ops_per_us = 7.8e3;
  double launch_us = 0.05;  // on the CPU a call from the program: 64 tiny kernels add ~2 us
  int64_t parallel_min_work = 1 << 16;
  // A few microseconds of arithmetic on one thread: a long loop over few lanes, a small MLP.
  double parallel_min_lane_ops = 1 << 18;
  double serial_slowdown = 1.7;
  double parallel_launch_us = 1.0;  // handing a kernel's chunks to the pool, and the join
  // A whole-loop kernel's per-step reductions: partial results per block of this many
  // lanes (a multiple of 16; on the GPU a warp, combined with shuffles).
  int64_t whole_loop_block_lanes = 0;  // 0: as many as the fusion pass chooses
  // GPU code: the PTX target ("sm_80", "sm_90") and ISA version (0: chosen for the
  // toolkit and driver at hand).
  std::string gpu_arch = "sm_80";
  int ptx_version = 0;

  bool is_gpu() const { return backend != Backend::kCpu; }
  // The target of a backend with this machine's figures: for the CPU, `cpu_lanes` in its
  // vectors and `cpu_unit_lanes` in the units that compute them (fewer where 512-bit
  // registers go through 256-bit units: AMD's Zen 4; 0: as many).
  static Target For(Backend backend, int cpu_lanes = 8, int cpu_unit_lanes = 0);
  // What distinguishes compilations for this target (part of compilation cache keys).
  std::string Key() const;
};

// This machine's last-level cache in bytes, from Linux's sysfs (0 where it says nothing);
// read once (the extension does at import: see bindings/module.cc).
double HostLastLevelCacheBytes();

// Threads of a GPU warp; lanes of a warp cooperate in reductions (shuffles).
constexpr int kWarpSize = 32;

// The lanes short rows go in, one row per lane (codegen/kernel_plan.cc; the cost model prices them so): 16 where the vectors hold
// 8 or 16, two vectors a step on AVX2, so that rows of 8 to 15 go in lanes there too
// (softmax, logsumexp, a policy's entropy over [65536, 10] and [65536, 15]: 2-3.2x). A
// row shorter than that is combined in order, one element at a time, in lanes or not (the
// rows left over, a batch of fewer rows, a kernel of XLA's plan): its bits never depend on
// how it was walked, nor on whether the host has 8 lanes or 16.
constexpr int ShortRowLanes(int max_width) { return max_width >= 8 ? 16 : max_width; }

}  // namespace fj
