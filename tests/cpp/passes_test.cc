// Each pass: IR text in, the pass, IR text out.
#include <gtest/gtest.h>

#include "analysis/buffer_assignment.h"
#include "analysis/evaluator.h"
#include "fusion/kernel_wrapper.h"
#include "passes/constant_folding.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/simplify.h"
#include "passes/tree_reduction.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Normalize;
using testing::Parse;
using testing::RunPass;

TEST(Dce, RemovesDeadChainsAndUnusedComputations) {
  bool changed = false;
  std::string out = RunPass<DcePass>(R"(
module m

%unused (a: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  ROOT %n = f32[] negate(%a)
}

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %dead1 = f32[4] exponential(%x)
  %dead2 = f32[4] negate(%dead1)
  %live = f32[4] abs(%x)
  ROOT %t = (f32[4]) tuple(%live)
}
)", &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(Normalize(out), Normalize(R"(
module m

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %live = f32[4] abs(%x)
  ROOT %t = (f32[4]) tuple(%live)
}
)"));
}

TEST(Dce, KeepsUnusedParameters) {
  bool changed = true;
  RunPass<DcePass>(R"(
module m
ENTRY %main (x: f32[4], unused: f32[2]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %unused = f32[2] parameter(1)
  ROOT %t = (f32[4]) tuple(%x)
}
)", &changed);
  EXPECT_FALSE(changed);
}

TEST(Cse, MergesIdenticalInstructionsAndConstants) {
  std::string out = RunPass<CsePass>(R"(
module m

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %c1 = f32[] constant(2)
  %c2 = f32[] constant(2)
  %b1 = f32[4] broadcast(%c1), dimensions={}
  %b2 = f32[4] broadcast(%c2), dimensions={}
  %m1 = f32[4] multiply(%x, %b1)
  %m2 = f32[4] multiply(%x, %b2)
  %s = f32[4] add(%m1, %m2)
  ROOT %t = (f32[4]) tuple(%s)
}
)");
  EXPECT_EQ(Normalize(out), Normalize(R"(
module m

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %c1 = f32[] constant(2)
  %b1 = f32[4] broadcast(%c1), dimensions={}
  %m1 = f32[4] multiply(%x, %b1)
  %s = f32[4] add(%m1, %m1)
  ROOT %t = (f32[4]) tuple(%s)
}
)"));
}

TEST(Cse, KeepsDifferentAttributesApart) {
  bool changed = true;
  RunPass<CsePass>(R"(
module m
ENTRY %main (x: f32[4]) -> (pred[4], pred[4]) {
  %x = f32[4] parameter(0)
  %a = pred[4] compare(%x, %x), direction=LT
  %b = pred[4] compare(%x, %x), direction=GT
  ROOT %t = (pred[4], pred[4]) tuple(%a, %b)
}
)", &changed);
  EXPECT_FALSE(changed);
}

TEST(Simplify, RemovesIdentitiesAndForwardsTuples) {
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[4,3]) -> (f32[4,3], f32[4,3]) {
  %x = f32[4,3] parameter(0)
  %zero = f32[] constant(0)
  %one = f32[] constant(1)
  %zb = f32[4,3] broadcast(%zero), dimensions={}
  %ob = f32[4,3] broadcast(%one), dimensions={}
  %a = f32[4,3] add(%x, %zb)
  %m = f32[4,3] multiply(%ob, %a)
  %n1 = f32[4,3] negate(%m)
  %n2 = f32[4,3] negate(%n1)
  %t1 = f32[3,4] transpose(%n2), dimensions={1,0}
  %t2 = f32[4,3] transpose(%t1), dimensions={1,0}
  %r = f32[4,3] reshape(%t2)
  %tup = (f32[4,3], f32[4,3]) tuple(%r, %x)
  %g0 = f32[4,3] get-tuple-element(%tup), index=0
  ROOT %t = (f32[4,3], f32[4,3]) tuple(%g0, %g0)
}
)");
  SimplifyPass simplify;
  DcePass dce;
  for (int i = 0; i < 4; ++i) {
    simplify.Run(*m);
    dce.Run(*m);
  }
  VerifyModule(*m);
  // Everything folds back to the parameter.
  const Instruction* root = m->entry()->root();
  EXPECT_EQ(root->operand(0)->opcode(), Opcode::kParameter) << m->ToString();
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::kParameter) << m->ToString();
  EXPECT_EQ(m->entry()->instruction_count(), 2) << m->ToString();
}

TEST(Simplify, KeepsFloatMultiplyByZero) {
  // x * 0 is not 0 for NaN or infinity.
  bool changed = true;
  RunPass<SimplifyPass>(R"(
module m
ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %zero = f32[] constant(0)
  %zb = f32[4] broadcast(%zero), dimensions={}
  %m = f32[4] multiply(%x, %zb)
  ROOT %t = (f32[4]) tuple(%m)
}
)", &changed);
  EXPECT_FALSE(changed);
}

TEST(ConstantFolding, FoldsSmallExpressions) {
  std::unique_ptr<Module> m = Parse(R"(
module m

%add_s32 (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %s = s32[] add(%a, %b)
}

ENTRY %main () -> (s32[], s32[3], f32[2]) {
  %c = s32[3] constant({7, -7, 5})
  %d = s32[3] constant({2, 2, 0})
  %q = s32[3] divide(%c, %d)
  %z = s32[] constant(0)
  %s = s32[] reduce(%q, %z), dimensions={0}, to_apply=%add_s32
  %f = f32[2] constant({2.5, -2.5})
  %r = f32[2] round-nearest-even(%f)
  ROOT %t = (s32[], s32[3], f32[2]) tuple(%s, %q, %r)
}
)");
  ConstantFoldingPass fold;
  while (fold.Run(*m)) {
  }
  DcePass().Run(*m);
  VerifyModule(*m);
  const Instruction* root = m->entry()->root();
  ASSERT_EQ(root->operand(1)->opcode(), Opcode::kConstant) << m->ToString();
  // XLA's integer semantics: 7/2 = 3, -7/2 = -3 (truncation), 5/0 = -1.
  EXPECT_EQ(root->operand(1)->literal().ToString(), "{3, -3, -1}");
  EXPECT_EQ(root->operand(0)->literal().ToString(), "-1");
  EXPECT_EQ(root->operand(2)->literal().ToString(), "{2, -2}");
}

TEST(ConstantFolding, LeavesLargeBroadcastsAlone) {
  bool changed = true;
  RunPass<ConstantFoldingPass>(R"(
module m
ENTRY %main () -> (f32[1000]) {
  %c = f32[] constant(1)
  %b = f32[1000] broadcast(%c), dimensions={}
  ROOT %t = (f32[1000]) tuple(%b)
}
)", &changed);
  EXPECT_FALSE(changed);
}

TEST(Evaluator, IntegerEdgeCasesFollowXla) {
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main () -> (s32[4], s32[4], s32[3], f32[1]) {
  %a = s32[4] constant({-2147483648, 5, -5, 9})
  %b = s32[4] constant({-1, 0, 3, -4})
  %q = s32[4] divide(%a, %b)
  %r = s32[4] remainder(%a, %b)
  %s = s32[3] constant({1, -8, 1})
  %n = s32[3] constant({40, 1, 31})
  %sh = s32[3] shift-right-arithmetic(%s, %n)
  %f = f32[1] constant({nan})
  %fc = s32[1] convert(%f)
  %back = f32[1] convert(%fc)
  ROOT %t = (s32[4], s32[4], s32[3], f32[1]) tuple(%q, %r, %sh, %back)
}
)");
  ConstantFoldingPass fold;
  while (fold.Run(*m)) {
  }
  const Instruction* root = m->entry()->root();
  EXPECT_EQ(root->operand(0)->literal().ToString(), "{-2147483648, -1, -1, -2}");
  EXPECT_EQ(root->operand(1)->literal().ToString(), "{0, 5, -2, 1}");
  EXPECT_EQ(root->operand(2)->literal().ToString(), "{0, -4, 0}");
  EXPECT_EQ(root->operand(3)->literal().ToString(), "{0}");
}

TEST(KernelWrapper, WrapsEveryComputeOpIntoAKernel) {
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[4]) -> (f32[2,2]) {
  %x = f32[4] parameter(0)
  %e = f32[4] exponential(%x)
  %r = f32[2,2] reshape(%e)
  %n = f32[2,2] negate(%r)
  ROOT %t = (f32[2,2]) tuple(%n)
}
)");
  KernelWrapperPass().Run(*m);
  VerifyModule(*m);
  int fusions = 0;
  for (const Instruction* i : m->entry()->MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion) ++fusions;
    // Reshapes stay outside kernels: they are bitcasts of row-major buffers.
    EXPECT_NE(i->opcode(), Opcode::kExp);
  }
  EXPECT_EQ(fusions, 2) << m->ToString();
}

TEST(BufferAssignment, ReusesTempsAndWritesOutputsInPlace) {
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[1024]) -> (f32[1024], f32[1024]) {
  %x = f32[1024] parameter(0)
  %a = f32[1024] exponential(%x)
  %b = f32[1024] negate(%a)
  %c = f32[1024] abs(%b)
  %d = f32[1024] sqrt(%c)
  ROOT %t = (f32[1024], f32[1024]) tuple(%d, %x)
}
)");
  KernelWrapperPass().Run(*m);
  BufferAssignment buffers(*m->entry());
  // %a and %b are temporaries with disjoint lifetimes... %b overlaps %a (read while
  // written), %c can reuse %a's slot: two temp slots of 4 KiB.
  EXPECT_EQ(buffers.temp_bytes(), 2 * 4096) << buffers.ToString();
  const Instruction* d = m->entry()->root()->operand(0);
  EXPECT_EQ(buffers.Get(d).kind, BufferKind::kOutput);
  // Returning a parameter needs a copy into the output buffer.
  ASSERT_EQ(buffers.output_copies().size(), 1u);
  EXPECT_EQ(buffers.output_copies()[0].output, 1);
  EXPECT_EQ(buffers.output_copies()[0].source.kind, BufferKind::kParameter);
}

}  // namespace
}  // namespace fj

namespace fj {
namespace {

// Regression: folding a size-1 broadcast of a parameter dereferenced a missing literal.
TEST(ConstantFolding, IgnoresSmallBroadcastsOfParameters) {
  bool changed = true;
  testing::RunPass<ConstantFoldingPass>(R"(
module m
ENTRY %main (x: f32[]) -> (f32[1,1,1]) {
  %x = f32[] parameter(0)
  %b = f32[1,1,1] broadcast(%x), dimensions={}
  ROOT %t = (f32[1,1,1]) tuple(%b)
}
)", &changed);
  EXPECT_FALSE(changed);
}

TEST(TreeReduction, SplitsLargeReductionsToAScalarIntoBlocks) {
  bool changed = false;
  std::string out = RunPass<TreeReductionPass>(R"(
module m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[3,43862], y: f32[65535], z: f32[4,65536]) -> (f32[], f32[], f32[4]) {
  %x = f32[3,43862] parameter(0)
  %y = f32[65535] parameter(1)
  %z = f32[4,65536] parameter(2)
  %zero = f32[] constant(0)
  %big = f32[] reduce(%x, %zero), dimensions={0,1}, to_apply=%add
  %small = f32[] reduce(%y, %zero), dimensions={0}, to_apply=%add
  %rows = f32[4] reduce(%z, %zero), dimensions={1}, to_apply=%add
  ROOT %t = (f32[], f32[], f32[4]) tuple(%big, %small, %rows)
}
)", &changed);
  EXPECT_TRUE(changed);
  // 131586 elements: 4 blocks of 32897, the last padded with the init value.
  EXPECT_NE(out.find("f32[131586] reshape(%x)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[131588] pad("), std::string::npos) << out;
  EXPECT_NE(out.find("padding=0_2"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4,32897] reshape("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4] reduce("), std::string::npos) << out;
  // Under two blocks' worth, and reductions with several outputs, stay as they are.
  EXPECT_NE(out.find("%small = f32[] reduce(%y, %zero)"), std::string::npos) << out;
  EXPECT_NE(out.find("%rows = f32[4] reduce(%z, %zero)"), std::string::npos) << out;
  EXPECT_EQ(out.find("%big = "), std::string::npos) << out;
}

}  // namespace

}  // namespace fj
