// The CPU cost model: what a kernel's estimate counts (benchmarks/cost_model.py compares
// the estimates with measured times).
#include <gtest/gtest.h>

#include <string>

#include "analysis/cost_model.h"
#include "fusion/fusion_pipeline.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::kF32Combiners;
using testing::Parse;

// Fuses `entry` under the fusionjit profile; returns the module (its one kernel: Kernel()).
std::unique_ptr<Module> FuseOne(const std::string& entry) {
  std::unique_ptr<Module> m = Parse(std::string("module m\n") + kF32Combiners + entry);
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
  // Three quarters of a lane-op per multiply-add (ElementCost of a dot).
  EXPECT_GE(f64, 0.75 * 64 * 64 * 64);
  EXPECT_GE(f512, 0.75 * 64 * 64 * 512);
  EXPECT_GT(f512 / f64, 5.0);  // the tanh's share is the same in both
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

// A layer norm's row statistics, fused (row fusion) into a kernel that another reduction's
// loop walks (its output stored as that loop's side output): codegen computes them again
// for every element there, and the estimate must say so. Priced once per row, as in a row
// kernel of their own, the merged kernel looked cheaper than two and took hours (large-tier
// fuzz seed 324735, f64 [1231, 1024]: a minute for one call).
TEST(CostModel, RowStatisticsAreOncePerRowOnlyInAKernelThatWalksTheirRows) {
  std::unique_ptr<Module> m = Parse(std::string("module m\n") + kF32Combiners + R"(
%rows (x: f32[256,1024]) -> f32[256,1024] {
  %x = f32[256,1024] parameter(0)
  %z = f32[] constant(0)
  %r = f32[256] reduce(%x, %z), dimensions={1}, to_apply=%add_f32
  %b = f32[256,1024] broadcast(%r), dimensions={0}
  ROOT %d = f32[256,1024] subtract(%x, %b)
}
%side (x: f32[256,1024]) -> (f32[256,1024], f32[32]) {
  %x = f32[256,1024] parameter(0)
  %z = f32[] constant(0)
  %r = f32[256] reduce(%x, %z), dimensions={1}, to_apply=%add_f32
  %b = f32[256,1024] broadcast(%r), dimensions={0}
  %d = f32[256,1024] subtract(%x, %b)
  %f = f32[32,8192] reshape(%d)
  %s = f32[32] reduce(%f, %z), dimensions={1}, to_apply=%add_f32
  ROOT %t = (f32[256,1024], f32[32]) tuple(%d, %s)
}
%total (d: f32[256,1024]) -> f32[32] {
  %d = f32[256,1024] parameter(0)
  %z = f32[] constant(0)
  %f = f32[32,8192] reshape(%d)
  ROOT %s = f32[32] reduce(%f, %z), dimensions={1}, to_apply=%add_f32
}
ENTRY %main (x: f32[256,1024]) -> (f32[256,1024], f32[32], f32[32]) {
  %x = f32[256,1024] parameter(0)
  %rowk = f32[256,1024] fusion(%x), kind=kLoop, calls=%rows
  %sidek = (f32[256,1024], f32[32]) fusion(%x), kind=kInput, calls=%side
  %totalk = f32[32] fusion(%rowk), kind=kInput, calls=%total
  %g = f32[32] get-tuple-element(%sidek), index=1
  ROOT %t = (f32[256,1024], f32[32], f32[32]) tuple(%rowk, %g, %totalk)
}
)");
  const Instruction* rowk = nullptr;
  const Instruction* sidek = nullptr;
  const Instruction* totalk = nullptr;
  for (const Instruction* i : m->entry()->MakePostOrder()) {
    if (i->name() == "rowk") rowk = i;
    if (i->name() == "sidek") sidek = i;
    if (i->name() == "totalk") totalk = i;
  }
  ASSERT_TRUE(rowk && sidek && totalk);
  double elements = 256.0 * 1024;
  ASSERT_NE(RowSpace(*rowk->fused_computation()), nullptr);
  EXPECT_EQ(RowSpace(*sidek->fused_computation()), nullptr);  // walked by the [32] reduction
  // In its own row kernel the row sum reads each element once.
  EXPECT_LT(EstimateKernel(rowk).flops, elements * 3);
  // Under the side-output reduction, each element sums its row again: 1024 adds apiece.
  EXPECT_GT(EstimateKernel(sidek).flops, elements * 1024 * 0.25);
  // The same, priced for fusing the row kernel into the reduction that reads it.
  EXPECT_LT(FlopsPerElementIn(rowk, RowSpaceOf(rowk)), 3.0);
  EXPECT_GT(FlopsPerElementIn(rowk, RowSpaceOf(totalk)), 1024 * 0.25);
}

// A value constant along a row is computed once per row only where that needs no loop of
// its own: a row kernel computes its own per-row reductions once per row, but a column
// mean read along the rows is summed again for every row (large-tier fuzz seed 324418).
TEST(CostModel, ARowInvariantValueWithALoopOfItsOwnIsNotOncePerRow) {
  auto estimate = [](const std::string& value) {
    std::unique_ptr<Module> m = Parse(std::string("module m\n") + kF32Combiners + R"(
%k (x: f32[256,512], y: f32[512,256]) -> f32[256,512] {
  %x = f32[256,512] parameter(0)
  %y = f32[512,256] parameter(1)
  %z = f32[] constant(0)
  %v = f32[256] )" + value + R"(
  %b = f32[256,512] broadcast(%v), dimensions={0}
  ROOT %d = f32[256,512] subtract(%x, %b)
}
ENTRY %main (x: f32[256,512], y: f32[512,256]) -> f32[256,512] {
  %x = f32[256,512] parameter(0)
  %y = f32[512,256] parameter(1)
  ROOT %f = f32[256,512] fusion(%x, %y), kind=kLoop, calls=%k
}
)");
    return EstimateKernel(m->entry()->root()).flops;
  };
  double elements = 256.0 * 512;
  // Its own row's sum: once per row.
  EXPECT_LT(estimate("reduce(%x, %z), dimensions={1}, to_apply=%add_f32"), elements * 3);
  // A column sum of another array: 512 adds for every element that reads it.
  EXPECT_GT(estimate("reduce(%y, %z), dimensions={0}, to_apply=%add_f32"), elements * 512 * 0.25);
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

// Rows shorter than 16 are combined in order, in lanes or one element at a time: no vector
// of partial results to combine at the end of each row.
TEST(CostModel, ShortRowsHaveNoPartialResultsToCombine) {
  auto steps = [](int columns) {
    std::string c = std::to_string(columns);
    auto m = FuseOne("ENTRY %main (x: f32[4096," + c + "]) -> f32[4096] {\n  %x = f32[4096," + c +
                     "] parameter(0)\n  %z = f32[] constant(0)\n  %e = f32[4096," + c +
                     "] exponential(%x)\n  ROOT %r = f32[4096] reduce(%e, %z), dimensions={1}, to_apply=%max_f32\n}\n");
    return EstimateKernel(Kernel(*m)).row_steps;
  };
  EXPECT_EQ(steps(6), 0.0);
  EXPECT_EQ(steps(15), 0.0);
  EXPECT_GE(steps(16), 4096.0 * 2);
}

// Before: x * x counted x twice, so ten squarings in a row (an unrolled scan's state goes
// through cos(theta)**2 every step) were priced at 2^10 times their work; the CartPole
// `unroll` variant under XLA's rules was estimated at 203 ms and took 2.3 ms.
TEST(CostModel, AValueReadTwiceAtTheSameIndexIsComputedOnce) {
  std::string body = "ENTRY %main (x: f32[4096]) -> f32[4096] {\n  %x = f32[4096] parameter(0)\n  %s0 = f32[4096] sine(%x)\n";
  for (int i = 1; i <= 10; ++i) {
    std::string prev = "%s" + std::to_string(i - 1);
    body += "  " + std::string(i == 10 ? "ROOT " : "") + "%s" + std::to_string(i) + " = f32[4096] multiply(" + prev + ", " +
            prev + ")\n";
  }
  auto m = FuseOne(body + "}\n");
  double flops = EstimateKernel(Kernel(*m)).flops;
  EXPECT_LT(flops, 4096.0 * (16 + 10) * 1.01);  // one sine and ten multiplies per element
  EXPECT_GT(flops, 4096.0 * 10);
}

// Before: a kernel was charged for all of an operand it reads one row of (a pool's row at
// the step's index: 16x the bytes of the CartPole pool variant's step), and for the row's
// index (`t % rows`, a scalar) once per element.
TEST(CostModel, ASlicedOperandCostsOnlyTheBytesAndIndicesRead) {
  auto m = FuseOne(R"(
ENTRY %main (pool: f32[16,4096], t: s32[]) -> f32[1,4096] {
  %pool = f32[16,4096] parameter(0)
  %t = s32[] parameter(1)
  %rows = s32[] constant(16)
  %i = s32[] remainder(%t, %rows)
  %z = s32[] constant(0)
  %row = f32[1,4096] dynamic-slice(%pool, %i, %z), dynamic_slice_sizes={1,4096}
  ROOT %e = f32[1,4096] exponential(%row)
}
)");
  const Instruction* kernel = Kernel(*m);
  KernelCost c = EstimateKernel(kernel);
  EXPECT_LT(c.bytes_read, 2 * 4096.0 * 4);
  EXPECT_GE(c.bytes_read, 4096.0 * 4);
  double exp = ElementCost(*kernel->fused_computation()->root());
  EXPECT_LT(c.flops, 4096.0 * (exp + 8));
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
  // Continuous at the cache's size and at twice it, from where every byte moves at memory's
  // bandwidth (streaming evicts what was cached: x + 1 over 16 MB took 3-5x the old
  // estimate, which priced its first 32 MB at the cache's speed).
  EXPECT_NEAR(per_byte(t.cache_bytes * 1.0001), per_byte(t.cache_bytes), 1e-3 * per_byte(t.cache_bytes));
  EXPECT_NEAR(per_byte(t.cache_bytes * 1.9999), per_byte(t.cache_bytes * 2), 1e-3 * per_byte(t.cache_bytes * 2));
  EXPECT_NEAR(per_byte(t.cache_bytes * 4), 1.0 / t.dram_bytes_per_us, 1e-12);

  // A kernel with little work and little arithmetic runs on the calling thread alone...
  KernelCost serial, parallel;
  serial.bytes_read = parallel.bytes_read = 64 * t.bytes_per_us;  // 64 us of reading
  serial.work = static_cast<double>(t.parallel_min_work - 1);
  parallel.work = static_cast<double>(t.parallel_min_work);
  EXPECT_FALSE(RunsInParallel(serial, t));
  EXPECT_TRUE(RunsInParallel(parallel, t));
  EXPECT_GT(model.TimeUs(serial), model.TimeUs(parallel) * 1.5);
  // ...but much arithmetic over few elements (a loop's many steps over a few lanes, a small
  // MLP) is worth the threads.
  KernelCost arithmetic;
  arithmetic.work = 256;
  arithmetic.flops = t.parallel_min_lane_ops;
  EXPECT_TRUE(RunsInParallel(arithmetic, t));
  // The GPU's figures have neither a cache tier nor a serial penalty.
  CostModel gpu(Target::For(Backend::kGpu));
  KernelCost tiny;
  tiny.work = 1;
  tiny.flops = 64 * t.flops_per_us;
  EXPECT_DOUBLE_EQ(gpu.TimeUs(tiny), gpu.target.launch_us + tiny.flops / gpu.target.flops_per_us);
}

std::unique_ptr<Module> RowKernel(int columns, const std::string& body, const std::string& out) {
  std::string c = std::to_string(columns);
  std::string shape = "f32[65536," + c + "]";
  std::string text = body;
  for (std::string::size_type at; (at = text.find("$S")) != std::string::npos;) text.replace(at, 2, shape);
  for (std::string::size_type at; (at = text.find("$C")) != std::string::npos;) text.replace(at, 2, c);
  return FuseOne("ENTRY %main (x: " + shape + ", b: f32[" + c + "]) -> " + out + " {\n  %x = " + shape +
                 " parameter(0)\n  %b = f32[" + c + "] parameter(1)\n" + text + "}\n");
}

// Before: the model priced short rows as if vectors ran along them. A plain sum of rows of
// 10 on 8 lanes runs one element at a time (codegen's ShortRowWalk): priced in scalar ops
// (measured 139 us, estimated 28 us); on 16 lanes a block of 16 rows of 10 fits a vector
// register and goes into lanes transposed. A bias added to rows of 4 goes through lanes,
// and its copies there cost (priced 50 us, measured 377 us before they were shuffled, 97
// us after: lane-ops, under a tanh more than the memory's time).
TEST(CostModel, ShortRowsArePricedAsTheTargetWalksThem) {
  auto sums = RowKernel(10, "  %z = f32[] constant(0)\n  ROOT %r = f32[65536] reduce(%x, %z), dimensions={1}, to_apply=%add_f32\n",
                        "f32[65536]");
  const Instruction* sum = Kernel(*sums);
  ShortRows walk = ShortRowWalk(sum, 8);
  EXPECT_TRUE(walk.one_at_a_time);
  EXPECT_FALSE(walk.in_lanes);
  KernelCost c = EstimateKernel(sum);
  Target t8 = Target::For(Backend::kCpu, 8), t16 = Target::For(Backend::kCpu, 16);
  EXPECT_GT(CostModel(t8).TimeUs(c), c.flops / t8.scalar_ops_per_us);
  walk = ShortRowWalk(sum, 16);
  EXPECT_TRUE(walk.in_lanes);
  EXPECT_EQ(walk.copied[static_cast<int>(RowCopy::kTranspose)], 65536.0 * 10);
  EXPECT_LT(CostModel(t16).TimeUs(c), CostModel(t8).TimeUs(c) / 2);

  auto bias = RowKernel(4, "  %bb = $S broadcast(%b), dimensions={1}\n  %y = $S add(%x, %bb)\n  ROOT %t = $S tanh(%y)\n",
                        "f32[65536,4]");
  const Instruction* add = Kernel(*bias);
  walk = ShortRowWalk(add, 16);
  EXPECT_TRUE(walk.in_lanes);
  EXPECT_EQ(walk.length, 4);
  // x in, the sum out (not the broadcast bias), by a tree of shuffles
  EXPECT_EQ(walk.copied[static_cast<int>(RowCopy::kShuffleTree)], 2.0 * 65536 * 4);
  EXPECT_EQ(walk.copied_total(), 2.0 * 65536 * 4);
  KernelCost cb = EstimateKernel(add);
  KernelCost flat = cb;
  flat.kernel = nullptr;  // as if it were walked flat
  // (the tanh makes it compute-bound: the copies' lane-ops add to the time)
  EXPECT_GT(CostModel(t16).TimeUs(cb), CostModel(t16).TimeUs(flat) + walk.copied_total() * 1.5 / t16.flops_per_us);
  // Rows of 16 have vectors along them; the GPU walks an element per thread.
  EXPECT_EQ(ShortRowWalk(Kernel(*RowKernel(16, "  %bb = $S broadcast(%b), dimensions={1}\n  ROOT %y = $S add(%x, %bb)\n",
                                           "f32[65536,16]")), 16).length, 0);
  EXPECT_EQ(ShortRowWalk(add, 1).length, 0);
}

// A sine and a cosine of one value share their work in one kernel (LLVM merges the range
// reduction and the polynomials both compute): priced at the first's cost and a fifth.
TEST(CostModel, ASineAndACosineOfOneValueShareTheirWork) {
  auto m = FuseOne(R"(
ENTRY %main (x: f32[4096], y: f32[4096]) -> f32[4096] {
  %x = f32[4096] parameter(0)
  %y = f32[4096] parameter(1)
  %s = f32[4096] sine(%x)
  %c = f32[4096] cosine(%x)
  %cy = f32[4096] cosine(%y)
  %a = f32[4096] add(%s, %c)
  ROOT %r = f32[4096] add(%a, %cy)
}
)");
  const Instruction* kernel = Kernel(*m);
  double trig = ElementCost(*kernel->fused_computation()->root()->operand(1));  // the cosine of y
  double flops = EstimateKernel(kernel).flops;
  EXPECT_NEAR(flops, 4096.0 * (trig * (1 + 0.2 + 1) + 2 * 0.5), 4096.0 * 0.01);
}

// 512-bit vectors through 256-bit units (Zen 4) compute 1.35x as fast as 256-bit vectors,
// not 2x: priced at 2x, an exp over 2^20 floats was estimated at 106 us and took 166.
TEST(CostModel, VectorsWiderThanTheirUnitsAreNotTwiceAsFast) {
  Target full = Target::For(Backend::kCpu, 16), halves = Target::For(Backend::kCpu, 16, 8);
  Target narrow = Target::For(Backend::kCpu, 8);
  EXPECT_DOUBLE_EQ(full.flops_per_us, 2 * narrow.flops_per_us);
  EXPECT_NEAR(halves.flops_per_us / narrow.flops_per_us, 1.35, 1e-9);
  EXPECT_EQ(halves.vector_lanes, 16);
  EXPECT_DOUBLE_EQ(Target::For(Backend::kCpu, 8, 8).flops_per_us, narrow.flops_per_us);
}

// A top_k over x [rows, n] (the runtime's custom call top_k.<dtype>): its cost, estimated
// time and whether it runs on the threads, taken while its module lives (a KernelCost
// points at its kernel).
struct TopKFigures {
  KernelCost cost;
  double us = 0;
  bool parallel = false;
};

TopKFigures TopKCost(int64_t rows, int64_t n, int64_t k) {
  std::string x = "f32[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  std::string out = "s32[" + std::to_string(rows) + "," + std::to_string(k) + "]";
  std::unique_ptr<Module> m = Parse("module m\nENTRY %main (x: " + x + ") -> " + out + " {\n  %x = " + x +
                                    " parameter(0)\n  %n = s64[] constant(" + std::to_string(n) +
                                    ")\n  %k = s64[] constant(" + std::to_string(k) + ")\n  ROOT %t = " + out +
                                    " custom-call(%x, %n, %k), custom_call_target=\"top_k.f32\"\n}\n");
  TopKFigures f;
  f.cost = EstimateKernel(m->entry()->root());
  f.us = CostModel().TimeUs(f.cost);
  f.parallel = RunsInParallel(f.cost, Target());
  f.cost.kernel = nullptr;
  return f;
}

// Before: a custom call's work was its outputs' elements, so top_k of [64, 32768] with
// k = 64 (4,096 outputs) ran on one thread, and its estimate was 50x under its time. Its
// work is its rows' elements, and its time grows with k (more elements enter the k kept)
// and most where k is a large share of the row (a selection and a sort).
TEST(CostModel, ATopKCallIsPricedByItsRows) {
  TopKFigures c = TopKCost(64, 32768, 64);
  EXPECT_EQ(c.cost.work, 64.0 * 32768);
  EXPECT_TRUE(c.parallel);
  double few = TopKCost(64, 32768, 4).us;
  double more = c.us;
  double sorted = TopKCost(64, 32768, 32768).us;
  EXPECT_LT(few, more);
  EXPECT_LT(4 * more, sorted);
  // Measured (2 threads): about 0.8 ms; a full sort of the rows about 60 ms.
  EXPECT_GT(more, 200.0);
  EXPECT_LT(more, 2000.0);
}

}  // namespace
}  // namespace fj
