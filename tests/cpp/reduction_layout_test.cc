// ReductionLayoutPass: reductions put in the shape the CPU's kernels walk fast.
#include <gtest/gtest.h>

#include "passes/reduction_layout.h"
#include "test_util.h"

namespace fj {
namespace {

// The pass for a target of `lanes` vector lanes, run on `text`: the printed result.
std::string RunForLanes(const std::string& text, int lanes, bool* changed) {
  std::unique_ptr<Module> m = testing::Parse(text);
  *changed = ReductionLayoutPass(lanes).Run(*m);
  VerifyModule(*m);
  return m->ToString();
}

constexpr const char* kAdd = R"(
module m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
)";

TEST(ReductionLayout, SplitsAGroupNormsStatisticsIntoAColumnAndARowReduction) {
  bool changed = false;
  std::string out = RunForLanes(std::string(kAdd) + R"(
ENTRY %main (x: f32[32,32,32,8,8]) -> f32[32,8] {
  %x = f32[32,32,32,8,8] parameter(0)
  %zero = f32[] constant(0)
  ROOT %m = f32[32,8] reduce(%x, %zero), dimensions={1,2,4}, to_apply=%add
}
)", 16, &changed);
  EXPECT_TRUE(changed);
  // Over the 1024 spatial positions of rows of 64 (group, channel) elements, then over
  // each group's 8 channels.
  EXPECT_NE(out.find("f32[32,1024,64] reshape(%x)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[32,64] reduce("), std::string::npos) << out;
  EXPECT_NE(out.find("dimensions={1}"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[32,8,8] reshape("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[32,8] reduce("), std::string::npos) << out;
  EXPECT_NE(out.find("dimensions={2}"), std::string::npos) << out;
  EXPECT_EQ(out.find("dimensions={1,2,4}"), std::string::npos) << out;
}

TEST(ReductionLayout, MergesTheMinorKeptDimensionsOfAColumnReduction) {
  bool changed = false;
  std::string out = RunForLanes(std::string(kAdd) + R"(
ENTRY %main (x: f32[32,1024,8,1,8]) -> f32[32,8,1,8] {
  %x = f32[32,1024,8,1,8] parameter(0)
  %zero = f32[] constant(0)
  ROOT %m = f32[32,8,1,8] reduce(%x, %zero), dimensions={1}, to_apply=%add
}
)", 16, &changed);
  EXPECT_TRUE(changed);
  EXPECT_NE(out.find("f32[32,1024,64] reshape(%x)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[32,64] reduce("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[32,8,1,8] reshape("), std::string::npos) << out;
}

TEST(ReductionLayout, LeavesReductionsThatAreWalkedFastAlone) {
  bool changed = false;
  std::string out = RunForLanes(std::string(kAdd) + R"(
ENTRY %main (ln: f32[64,128,256], pool: f32[32,16,16,64], long_run: f32[32,64,8,256], cols: f32[4096,6]) -> (f32[64,128], f32[32,64], f32[32,8], f32[6]) {
  %ln = f32[64,128,256] parameter(0)
  %pool = f32[32,16,16,64] parameter(1)
  %long_run = f32[32,64,8,256] parameter(2)
  %cols = f32[4096,6] parameter(3)
  %zero = f32[] constant(0)
  %row = f32[64,128] reduce(%ln, %zero), dimensions={2}, to_apply=%add
  %spatial = f32[32,64] reduce(%pool, %zero), dimensions={1,2}, to_apply=%add
  %runs = f32[32,8] reduce(%long_run, %zero), dimensions={1,3}, to_apply=%add
  %bias = f32[6] reduce(%cols, %zero), dimensions={0}, to_apply=%add
  ROOT %t = (f32[64,128], f32[32,64], f32[32,8], f32[6]) tuple(%row, %spatial, %runs, %bias)
}
)", 16, &changed);
  // A row reduction (a layer norm's), a reduced run before one kept minor dimension (a
  // global average pool), a minor run of four vectors and more, a bias gradient.
  EXPECT_FALSE(changed) << out;
}

TEST(ReductionLayout, LeavesTheGpusReductionsAlone) {
  bool changed = false;
  RunForLanes(std::string(kAdd) + R"(
ENTRY %main (x: f32[32,32,32,8,8]) -> f32[32,8] {
  %x = f32[32,32,32,8,8] parameter(0)
  %zero = f32[] constant(0)
  ROOT %m = f32[32,8] reduce(%x, %zero), dimensions={1,2,4}, to_apply=%add
}
)", 1, &changed);
  EXPECT_FALSE(changed);
}

}  // namespace
}  // namespace fj
