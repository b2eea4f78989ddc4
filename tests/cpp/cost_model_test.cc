// The CPU cost model: what a kernel's estimate counts (benchmarks/cost_model.py compares
// the estimates with measured times).
#include <gtest/gtest.h>

#include <string>

#include "analysis/cost_model.h"
#include "fusion/fusion_pipeline.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Parse;

const char* kAdd = R"(
%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%max_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] maximum(%a, %b)
}
)";

// Fuses `entry` under the fusionjit profile; returns the module (its one kernel: Kernel()).
std::unique_ptr<Module> FuseOne(const std::string& entry) {
  std::unique_ptr<Module> m = Parse(std::string("module m\n") + kAdd + entry);
  Pipeline p("fusion");
  AddFusionPasses(p, GetFusionProfile("fusionjit"), nullptr);
  p.Run(*m);
  return m;
}

const Instruction* Kernel(const Module& m) {
  const Instruction* kernel = nullptr;
  for (const Instruction* i : m.entry()->MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion) {
      EXPECT_EQ(kernel, nullptr) << "more than one kernel:\n" << m.ToString();
      kernel = i;
    }
  }
  EXPECT_NE(kernel, nullptr) << m.ToString();
  return kernel;
}

std::string DenseLayer(int k) {
  std::string K = std::to_string(k);
  return "ENTRY %main (a: f32[64," + K + "], b: f32[" + K + ",64]) -> f32[64,64] {\n"
         "  %a = f32[64," + K + "] parameter(0)\n"
         "  %b = f32[" + K + ",64] parameter(1)\n"
         "  %d = f32[64,64] dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, "
         "rhs_contracting_dims={0}\n"
         "  ROOT %t = f32[64,64] tanh(%d)\n}\n";
}

// Before: a product inside a fusion counted one op per output element, not its k
// multiply-adds: a 1024^3 matmul was estimated at 315 us and took 9 ms.
TEST(CostModel, AProductsWorkIsItsMultiplyAdds) {
  auto small = FuseOne(DenseLayer(64));
  auto large = FuseOne(DenseLayer(512));
  double f64 = EstimateKernel(Kernel(*small)).flops;
  double f512 = EstimateKernel(Kernel(*large)).flops;
  EXPECT_GE(f64, 64.0 * 64 * 64);
  EXPECT_GE(f512, 64.0 * 64 * 512);
  EXPECT_GT(f512 / f64, 6.0);  // the tanh's share is the same in both
}

// Before: a row's 1/sqrt(var) read through a broadcast was priced once per element of the
// row (a layer norm estimated 3-5x over its measured time); the kernel computes it once per
// row, outside the row's inner loop.
TEST(CostModel, AValueConstantAlongTheRowIsComputedOncePerRow) {
  auto m = FuseOne(R"(
ENTRY %main (x: f32[256,1024], v: f32[256]) -> f32[256,1024] {
  %x = f32[256,1024] parameter(0)
  %v = f32[256] parameter(1)
  %s = f32[256] sqrt(%v)
  %b = f32[256,1024] broadcast(%s), dimensions={0}
  ROOT %d = f32[256,1024] divide(%x, %b)
}
)");
  const Instruction* kernel = Kernel(*m);
  double elements = 256.0 * 1024;
  double divide = elements * ElementCost(*kernel->fused_computation()->root());
  EXPECT_LT(EstimateKernel(kernel).flops, divide * 1.05);
}

// Row reductions pay per output for combining a vector of partial results; a max (its NaN
// tests) more than a sum.
TEST(CostModel, ARowMaxCostsMoreThanARowSum) {
  auto estimate = [](const std::string& combiner) {
    auto m = FuseOne(R"(
ENTRY %main (x: f32[65536,16]) -> f32[65536] {
  %x = f32[65536,16] parameter(0)
  %z = f32[] constant(0)
  %e = f32[65536,16] exponential(%x)
  ROOT %r = f32[65536] reduce(%e, %z), dimensions={1}, to_apply=)" + combiner + R"(
}
)");
    KernelCost c = EstimateKernel(Kernel(*m));
    EXPECT_GE(c.row_steps, 65536.0 * 2);
    return CostModel(Target::For(Backend::kCpu, 16)).TimeUs(c);
  };
  EXPECT_GT(estimate("%max_f32"), estimate("%add_f32"));
}

TEST(CostModel, BytesPastTheCacheAndSmallKernelsCostMore) {
  CostModel model(Target::For(Backend::kCpu, 16));
  const Target& t = model.target;
  auto per_byte = [&](double bytes) {
    KernelCost c;
    c.bytes_read = bytes;
    c.work = 1e9;
    return (model.TimeUs(c) - t.launch_us - t.parallel_launch_us) / bytes;
  };
  EXPECT_NEAR(per_byte(t.cache_bytes / 2), 1.0 / t.bytes_per_us, 1e-12);
  EXPECT_GT(per_byte(t.cache_bytes * 4), 2.0 * per_byte(t.cache_bytes / 2));
  // Continuous at the cache's size.
  EXPECT_NEAR(per_byte(t.cache_bytes * 1.0001), per_byte(t.cache_bytes), 1e-3 * per_byte(t.cache_bytes));

  // A kernel below the parallel threshold runs on the calling thread alone.
  KernelCost serial, parallel;
  serial.flops = parallel.flops = 64 * t.flops_per_us;  // 64 us of lane-ops on all threads
  serial.work = static_cast<double>(t.parallel_min_work - 1);
  parallel.work = static_cast<double>(t.parallel_min_work);
  EXPECT_GT(model.TimeUs(serial), model.TimeUs(parallel) * 1.5);
  // The GPU's figures have neither a cache tier nor a serial penalty.
  CostModel gpu(Target::For(Backend::kGpu));
  serial.work = 1;
  EXPECT_DOUBLE_EQ(gpu.TimeUs(serial), gpu.target.launch_us + serial.flops / gpu.target.flops_per_us);
}

}  // namespace
}  // namespace fj
