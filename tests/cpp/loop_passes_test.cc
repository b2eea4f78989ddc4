// The loop passes: trip counts, simplification and unrolling of while loops.
#include <gtest/gtest.h>

#include <string>

#include "passes/carry_split.h"
#include "passes/dce.h"
#include "passes/loop_invariant_layout.h"
#include "passes/loop_output_reduction.h"
#include "passes/simplify.h"
#include "passes/while_loop.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Parse;

// x -> x * x, `trips` times (a counter i < trips); `unroll` as given.
std::string CountedLoop(int unroll, bool dead_carry = false, int trips = 10) {
  std::string extra_type = dead_carry ? ", f32[4]" : "";
  std::string state = "(s32[], f32[4]" + extra_type + ")";
  return R"(
module m

%body (p: )" + state + R"() -> )" + state + R"( {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[4] get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %y = f32[4] multiply(%x, %x)
)" + (dead_carry ? "  %d = f32[4] get-tuple-element(%p), index=2\n  %e = f32[4] exponential(%d)\n" : "") +
         "  ROOT %t = " + state + " tuple(%next, %y" + (dead_carry ? ", %e" : "") + R"()
}

%cond (p: )" + state + R"() -> pred[] {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant()" + std::to_string(trips) + R"()
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = )" + state + " tuple(%zero, %x" + (dead_carry ? ", %x" : "") + R"()
  %w = )" + state + R"( while(%init), condition=%cond, body=%body, unroll=)" + std::to_string(unroll) + R"(
  %r = f32[4] get-tuple-element(%w), index=1
  ROOT %out = (f32[4]) tuple(%r)
}
)";
}

const Instruction* TheLoop(const Module& m) {
  const Instruction* found = nullptr;
  for (const Instruction* i : m.entry()->MakePostOrder()) {
    if (i->opcode() == Opcode::kWhile) found = i;
  }
  return found;
}

int Count(const Computation& c, Opcode op) {
  int n = 0;
  for (const Instruction* i : c.MakePostOrder()) n += i->opcode() == op;
  return n;
}

TEST(WhileTripCount, FindsTheCountOfACountedLoop) {
  auto m = Parse(CountedLoop(0));
  EXPECT_TRUE(WhileTripCountPass().Run(*m));
  ASSERT_NE(TheLoop(*m), nullptr);
  EXPECT_EQ(TheLoop(*m)->attrs().trip_count, 10);
}

TEST(WhileLoopSimplify, RemovesACarryNothingReads) {
  auto m = Parse(CountedLoop(0, /*dead_carry=*/true));
  EXPECT_TRUE(WhileLoopSimplifyPass().Run(*m));
  const Instruction* loop = TheLoop(*m);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->shape().tuple_shapes().size(), 2u);
  DcePass().Run(*m);  // the pass leaves the dead element's ops to DCE, as the pipeline runs
  EXPECT_EQ(Count(*TheLoop(*m)->while_body(), Opcode::kExp), 0);
}

TEST(WhileLoopUnroll, RunsTheUsersFactorAndTheRemainderAfterTheLoop) {
  auto m = Parse(CountedLoop(4));
  WhileTripCountPass().Run(*m);
  int64_t noted = 0;
  std::string why;
  WhileLoopUnrollPass unroll(false, [&](const Instruction*, int64_t factor, const std::string& w) {
    noted = factor;
    why = w;
  });
  EXPECT_TRUE(unroll.Run(*m));
  const Instruction* loop = TheLoop(*m);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->attrs().trip_count, 2);  // two trips of four steps
  EXPECT_EQ(Count(*loop->while_body(), Opcode::kMultiply), 4);
  EXPECT_EQ(Count(*m->entry(), Opcode::kMultiply), 2);  // the two steps left over
  EXPECT_EQ(noted, 4);
  EXPECT_NE(why.find("unroll=4"), std::string::npos) << why;
}

TEST(WhileLoopUnroll, AFactorOfTheTripCountRemovesTheLoop) {
  auto m = Parse(CountedLoop(10));
  WhileTripCountPass().Run(*m);
  EXPECT_TRUE(WhileLoopUnrollPass().Run(*m));
  EXPECT_EQ(TheLoop(*m), nullptr);
  EXPECT_EQ(Count(*m->entry(), Opcode::kMultiply), 10);
}

TEST(WhileLoopUnroll, TheCostModelChoosesOnlyWhenAskedAndSaysWhy) {
  for (bool choose : {false, true}) {
    auto m = Parse(CountedLoop(0, false, 100));
    WhileTripCountPass().Run(*m);
    int64_t noted = 0;
    std::string why;
    WhileLoopUnrollPass unroll(choose, [&](const Instruction*, int64_t factor, const std::string& w) {
      noted = factor;
      why = w;
    });
    EXPECT_EQ(unroll.Run(*m), choose);
    if (choose) {
      // A tiny body of 100 steps: unrolled (by a factor dividing 100), the cost model named.
      EXPECT_GT(noted, 1);
      EXPECT_EQ(100 % noted, 0);
      EXPECT_NE(why.find("cost model"), std::string::npos) << why;
    } else {
      EXPECT_EQ(noted, 1);
      ASSERT_NE(TheLoop(*m), nullptr);
      EXPECT_EQ(Count(*TheLoop(*m)->while_body(), Opcode::kMultiply), 1);
    }
  }
}

TEST(WhileLoopUnroll, TheCostModelKeepsTheUnrolledBodySmall) {
  // LLVM takes superlinear time on long kernels: the factor shrinks as the body grows.
  EXPECT_EQ(WhileLoopUnrollPass::ChooseFactor(0.01, 1000, 100), 8);
  EXPECT_EQ(WhileLoopUnrollPass::ChooseFactor(0.01, 1000, WhileLoopUnrollPass::kMaxUnrolledOps / 325), 2);
  EXPECT_EQ(WhileLoopUnrollPass::ChooseFactor(0.01, 1000, 1), 1);
  EXPECT_EQ(WhileLoopUnrollPass::ChooseFactor(0.01, 999, 3), 3);  // no divisor: up to the cap
}

TEST(WhileLoopUnroll, TheCostModelKeepsABodyOfSeveralKernels) {
  // Each step a chain of three reductions (three kernels): unrolled copies would launch as
  // many kernels and compile each copy; only the loop's own step would be saved.
  const std::string state = "(s32[], f32[8,8])";
  auto m = Parse(R"(
module m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: )" + state + R"() -> )" + state + R"( {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8,8] get-tuple-element(%p), index=1
  %zero = f32[] constant(0)
  %r0 = f32[8] reduce(%x, %zero), dimensions={1}, to_apply=%add
  %b0 = f32[8,8] broadcast(%r0), dimensions={0}
  %x1 = f32[8,8] subtract(%x, %b0)
  %r1 = f32[8] reduce(%x1, %zero), dimensions={0}, to_apply=%add
  %b1 = f32[8,8] broadcast(%r1), dimensions={1}
  %x2 = f32[8,8] subtract(%x1, %b1)
  %r2 = f32[8] reduce(%x2, %zero), dimensions={1}, to_apply=%add
  %b2 = f32[8,8] broadcast(%r2), dimensions={0}
  %y = f32[8,8] multiply(%x2, %b2)
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = )" + state + R"( tuple(%next, %y)
}

%cond (p: )" + state + R"() -> pred[] {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(24)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[8,8]) -> (f32[8,8]) {
  %x = f32[8,8] parameter(0)
  %zero = s32[] constant(0)
  %init = )" + state + R"( tuple(%zero, %x)
  %w = )" + state + R"( while(%init), condition=%cond, body=%body
  %r = f32[8,8] get-tuple-element(%w), index=1
  ROOT %out = (f32[8,8]) tuple(%r)
}
)");
  WhileTripCountPass().Run(*m);
  ASSERT_NE(TheLoop(*m), nullptr);
  EXPECT_EQ(WhileLoopUnrollPass::KernelEndingOps(*TheLoop(*m)->while_body()), 3);
  int64_t noted = 0;
  std::string why;
  WhileLoopUnrollPass unroll(true, [&](const Instruction*, int64_t factor, const std::string& w) {
    noted = factor;
    why = w;
  });
  EXPECT_FALSE(unroll.Run(*m));
  EXPECT_EQ(noted, 1);
  EXPECT_NE(why.find("a step of 3 reductions"), std::string::npos) << why;
}

// A [2, 4] carry read only by rows becomes two [4] carries; the instructions that read the
// loop's result are replaced. (The pass once read them after removing them: ASan, or the
// compile itself now and then, caught it on the CartPole pool's two loops.)
TEST(LoopCarrySplit, SplitsARowReadCarryAndRebuildsItsReaders) {
  const std::string state = "(s32[], f32[2,4])";
  auto m = Parse(R"(
module m

%body (p: )" + state + R"() -> )" + state + R"( {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[2,4] get-tuple-element(%p), index=1
  %a = f32[1,4] slice(%x), slice={[0:1:1], [0:4:1]}
  %b = f32[1,4] slice(%x), slice={[1:2:1], [0:4:1]}
  %s = f32[1,4] add(%a, %b)
  %y = f32[2,4] concatenate(%s, %a), dimensions={0}
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = )" + state + R"( tuple(%next, %y)
}

%cond (p: )" + state + R"() -> pred[] {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[2,4]) -> (f32[2,4], s32[]) {
  %x = f32[2,4] parameter(0)
  %zero = s32[] constant(0)
  %init = )" + state + R"( tuple(%zero, %x)
  %w = )" + state + R"( while(%init), condition=%cond, body=%body
  %r = f32[2,4] get-tuple-element(%w), index=1
  %c = s32[] get-tuple-element(%w), index=0
  ROOT %out = (f32[2,4], s32[]) tuple(%r, %c)
}
)");
  EXPECT_TRUE(LoopCarrySplitPass().Run(*m));
  m->ReleaseRemoved();
  VerifyModule(*m);
  const Instruction* loop = TheLoop(*m);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->shape().tuple_shapes().size(), 3u);  // the counter and two rows
  EXPECT_EQ(m->entry()->root()->operand(0)->opcode(), Opcode::kConcatenate);  // packed again
}

TEST(LoopCarrySplit, SplitsAStateReadByColumnsAlongItsLastAxis) {
  // The same state stacked per environment and vmapped: [N, 2], read s[:, 0] and s[:, 1].
  const std::string state = "(s32[], f32[4,2])";
  auto m = Parse(R"(
module m

%body (p: )" + state + R"() -> )" + state + R"( {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[4,2] get-tuple-element(%p), index=1
  %a = f32[4,1] slice(%x), slice={[0:4:1], [0:1:1]}
  %b = f32[4,1] slice(%x), slice={[0:4:1], [1:2:1]}
  %s = f32[4,1] add(%a, %b)
  %y = f32[4,2] concatenate(%s, %a), dimensions={1}
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = )" + state + R"( tuple(%next, %y)
}

%cond (p: )" + state + R"() -> pred[] {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[4,2]) -> f32[4,2] {
  %x = f32[4,2] parameter(0)
  %zero = s32[] constant(0)
  %init = )" + state + R"( tuple(%zero, %x)
  %w = )" + state + R"( while(%init), condition=%cond, body=%body
  ROOT %r = f32[4,2] get-tuple-element(%w), index=1
}
)");
  EXPECT_TRUE(LoopCarrySplitPass().Run(*m));
  m->ReleaseRemoved();
  VerifyModule(*m);
  const Instruction* loop = TheLoop(*m);
  ASSERT_NE(loop, nullptr);
  ASSERT_EQ(loop->shape().tuple_shapes().size(), 3u);  // the counter and two columns
  EXPECT_EQ(loop->shape().tuple_shapes()[1].dims(), (std::vector<int64_t>{4}));
  const Instruction* packed = m->entry()->root();
  ASSERT_EQ(packed->opcode(), Opcode::kConcatenate);
  EXPECT_EQ(packed->dimensions(), (std::vector<int64_t>{1}));
}

TEST(LoopOutputReduction, ReducesEachRowInTheLoopInsteadOfTheStackedRowsAfterIt) {
  // ys = scan(...)[1]; ys.sum(1): the loop writes a [5] of row sums, not the [5, 8] rows.
  const std::string state = "(s32[], f32[8], f32[5,8])";
  auto m = Parse(R"(
module m

%add_f32 (lhs: f32[], rhs: f32[]) -> f32[] {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %add = f32[] add(%lhs, %rhs)
}

%body (p: )" + state + R"() -> )" + state + R"( {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %c = f32[8] get-tuple-element(%p), index=1
  %ys = f32[5,8] get-tuple-element(%p), index=2
  %y = f32[8] multiply(%c, %c)
  %row = f32[1,8] reshape(%y)
  %zero = s32[] constant(0)
  %next_ys = f32[5,8] dynamic-update-slice(%ys, %row, %i, %zero)
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = )" + state + R"( tuple(%next, %y, %next_ys)
}

%cond (p: )" + state + R"() -> pred[] {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[8]) -> (f32[8], f32[5]) {
  %x = f32[8] parameter(0)
  %zero = s32[] constant(0)
  %fzero = f32[] constant(0)
  %ys0 = f32[5,8] broadcast(%fzero), dimensions={}
  %init = )" + state + R"( tuple(%zero, %x, %ys0)
  %w = )" + state + R"( while(%init), condition=%cond, body=%body
  %c = f32[8] get-tuple-element(%w), index=1
  %ys = f32[5,8] get-tuple-element(%w), index=2
  %sum = f32[5] reduce(%ys, %fzero), dimensions={1}, to_apply=%add_f32
  ROOT %out = (f32[8], f32[5]) tuple(%c, %sum)
}
)");
  EXPECT_TRUE(LoopOutputReductionPass().Run(*m));
  for (int i = 0; i < 2; ++i) {  // as in the repair pipeline: the old rows are then dead
    SimplifyPass().Run(*m);
    DcePass().Run(*m);
    WhileLoopSimplifyPass().Run(*m);
  }
  m->ReleaseRemoved();
  VerifyModule(*m);
  const Instruction* loop = TheLoop(*m);
  ASSERT_NE(loop, nullptr);
  for (const Shape& s : loop->shape().tuple_shapes()) EXPECT_NE(s.dims(), (std::vector<int64_t>{5, 8}));
  const Instruction* sums = m->entry()->root()->operand(1);
  EXPECT_EQ(sums->opcode(), Opcode::kGetTupleElement);
  EXPECT_EQ(sums->operand(0), loop);
  // Each step reduces its row whole into the new element.
  const Instruction* write = loop->while_body()->root()->operand(static_cast<int>(sums->tuple_index()));
  ASSERT_EQ(write->opcode(), Opcode::kDynamicUpdateSlice);
  EXPECT_EQ(write->operand(1)->operand(0)->opcode(), Opcode::kReduce);
  // A stacked output read otherwise than by one row reduction stays.
  EXPECT_FALSE(LoopOutputReductionPass().Run(*m));
}

TEST(LoopInvariantLayout, CarriesATransposedInvariantAsItWasAndSlicesItThere) {
  const std::string state = "(s32[], f32[8], f32[8,3])";
  auto m = Parse(R"(
module m

%body (p: )" + state + R"() -> )" + state + R"( {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %c = f32[8] get-tuple-element(%p), index=1
  %pool = f32[8,3] get-tuple-element(%p), index=2
  %zero = s32[] constant(0)
  %row = f32[8,1] dynamic-slice(%pool, %zero, %i), dynamic_slice_sizes={8,1}
  %r = f32[8] reshape(%row)
  %y = f32[8] add(%c, %r)
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = )" + state + R"( tuple(%next, %y, %pool)
}

%cond (p: )" + state + R"() -> pred[] {
  %p = )" + state + R"( parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[8], q: f32[3,8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %q = f32[3,8] parameter(1)
  %tq = f32[8,3] transpose(%q), dimensions={1,0}
  %zero = s32[] constant(0)
  %init = )" + state + R"( tuple(%zero, %x, %tq)
  %w = )" + state + R"( while(%init), condition=%cond, body=%body
  ROOT %c = f32[8] get-tuple-element(%w), index=1
}
)");
  EXPECT_TRUE(LoopInvariantLayoutPass().Run(*m));
  for (int i = 0; i < 2; ++i) {
    SimplifyPass().Run(*m);
    DcePass().Run(*m);
  }
  m->ReleaseRemoved();
  VerifyModule(*m);
  const Instruction* loop = TheLoop(*m);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->operand(0)->operand(2)->name(), "q");   // carried untransposed
  for (const Instruction* i : loop->while_body()->MakePostOrder()) {
    EXPECT_NE(i->opcode(), Opcode::kTranspose) << loop->while_body()->ToString();
    if (i->opcode() == Opcode::kDynamicSlice) {
      EXPECT_EQ(i->shape().dims(), (std::vector<int64_t>{1, 8}));
    }
  }
}

}  // namespace
}  // namespace fj
