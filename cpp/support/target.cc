// Targets (see target.h).
#include "support/target.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "support/error.h"

namespace fj {

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kCpu: return "cpu";
    case Backend::kGpu: return "gpu";
    case Backend::kGpuEmulated: return "gpu_emulated";
  }
  return "?";
}

Backend ParseBackend(const std::string& name) {
  for (Backend b : {Backend::kCpu, Backend::kGpu, Backend::kGpuEmulated}) {
    if (name == BackendName(b)) return b;
  }
  ThrowInvalidArgument("unknown backend '", name, "': the backends are 'cpu', 'gpu' and 'gpu_emulated'");
}

double HostLastLevelCacheBytes() {
  static const double bytes = [] {
    double best = 0;
    for (int index = 0; index < 8; ++index) {
      std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
      std::string text;
      if (!(in >> text) || text.empty()) continue;
      double v = std::atof(text.c_str());
      char unit = text.back();
      v *= unit == 'K' ? 1024.0 : unit == 'M' ? 1024.0 * 1024 : 1.0;
      best = std::max(best, v);
    }
    return best;
  }();
  return bytes;
}

Target Target::For(Backend backend, int cpu_lanes, int cpu_unit_lanes) {
  Target t;
  t.backend = backend;
  if (backend == Backend::kCpu) {
    // A kernel's bytes read and written share the cache: half of it holds each.
    if (double llc = HostLastLevelCacheBytes(); llc >= 1024.0 * 1024) t.cache_bytes = llc / 2;
    t.vector_lanes = cpu_lanes;
    t.flops_per_us = t.scalar_ops_per_us * cpu_lanes;
    // Vectors twice as wide as their units run each instruction in two halves, and still
    // save instructions: 1.35x the speed of half-width vectors (Zen 4, 16 lanes against 8:
    // exp over 2^20 floats 166 us against 228, softmax over [1024, 1024] 268 against 442).
    if (cpu_unit_lanes > 0 && cpu_unit_lanes < cpu_lanes) t.flops_per_us = t.scalar_ops_per_us * cpu_unit_lanes * 1.35;
    int unit_lanes = cpu_unit_lanes > 0 ? std::min(cpu_unit_lanes, cpu_lanes) : cpu_lanes;
    t.whole_loop_flops_per_us = t.scalar_ops_per_us * unit_lanes * t.whole_loop_register_gain;
    return t;
  }
  // A GPU (H100-class): one element per thread, a warp per row of a row reduction, tens of
  // thousands of threads to fill, ~3 TB/s, launches of a few microseconds. Rows are not
  // kept in buffers (a thread's stack is slow local memory): they are computed again.
  t.vector_lanes = 1;
  t.max_kept_row_bytes = 0;
  // Rows are split only when long (a warp reduces a row; splitting short ones would break
  // row fusion for little gain), column reductions when there are few columns.
  t.tree.block_elements = 4096;
  t.tree.min_block_rows = 4096;
  t.tree.max_blocks = 4096;
  t.tree.enough_units = 2048;
  t.tree.column_group = 1;
  t.bytes_per_us = 2.5e6;
  t.dram_bytes_per_us = 2.5e6;
  t.cache_bytes = 0;
  t.flops_per_us = 3e7;
  t.whole_loop_flops_per_us = t.flops_per_us;
  t.whole_loop_register_gain = 1;
  t.scalar_ops_per_us = t.flops_per_us;  // a thread an element: every op is one element's
  t.launch_us = 3.0;
  t.parallel_min_work = 0;
  t.parallel_min_lane_ops = 0;
  t.serial_slowdown = 1.0;
  t.parallel_launch_us = 0;
  t.whole_loop_block_lanes = kWarpSize;
  return t;
}

std::string Target::Key() const {
  std::string key = BackendName(backend);
  if (backend == Backend::kCpu) return key + ":" + std::to_string(vector_lanes);
  return key + ":" + gpu_arch + ":" + std::to_string(ptx_version);
}

}  // namespace fj
