// Each pass: IR text in, the pass, IR text out.
#include <gtest/gtest.h>

#include <map>

#include "analysis/buffer_assignment.h"
#include "analysis/evaluator.h"
#include "fusion/kernel_wrapper.h"
#include "passes/constant_folding.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/dot_layout.h"
#include "passes/simplify.h"
#include "passes/tree_reduction.h"
#include "support/error.h"
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

// A host callback (debug.print) does something besides its value: DCE keeps it, and the
// loops that call one, though nothing reads them; CSE merges no two of them.
TEST(Dce, KeepsHostCallbacksAndTheLoopsThatCallThem) {
  const char* text = R"(
module m

%body (p: (s32[], s32[])) -> (s32[], s32[]) {
  %p = (s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %t = s32[] get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %cb = s32[] custom-call(%i, %t), custom_call_target="host_callback.7"
  ROOT %r = (s32[], s32[]) tuple(%next, %t)
}

%cond (p: (s32[], s32[])) -> pred[] {
  %p = (s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], s32[]) tuple(%zero, %zero)
  %loop1 = (s32[], s32[]) while(%init), condition=%cond, body=%body
  %loop2 = (s32[], s32[]) while(%init), condition=%cond, body=%body
  %print = s32[] custom-call(%x, %zero), custom_call_target="host_callback.8"
  %other = s32[] custom-call(%x, %zero), custom_call_target="threefry_unused"
  ROOT %t = (f32[4]) tuple(%x)
}
)";
  std::string dce = RunPass<DcePass>(text);
  for (const char* kept : {"%loop1", "%loop2", "%print", "%cb"}) EXPECT_NE(dce.find(kept), std::string::npos) << kept;
  EXPECT_EQ(dce.find("%other"), std::string::npos);
  std::string cse = RunPass<CsePass>(text);
  EXPECT_NE(cse.find("%loop2"), std::string::npos);
}

// The gradient of a split: the pads of the pieces' cotangents, summed, are their
// concatenate (zeros in the gaps); overlapping or two-dimensional pads are left alone.
TEST(Simplify, ASumOfDisjointZeroPadsIsAConcatenate) {
  std::string out = RunPass<SimplifyPass>(R"(
module m

ENTRY %main (a: f32[4,2], b: f32[4,3], c: f32[4,1]) -> (f32[4,8], f32[4,8]) {
  %a = f32[4,2] parameter(0)
  %b = f32[4,3] parameter(1)
  %c = f32[4,1] parameter(2)
  %zero = f32[] constant(0)
  %pa = f32[4,8] pad(%a, %zero), padding=0_0_0x0_6_0
  %pb = f32[4,8] pad(%b, %zero), padding=0_0_0x4_1_0
  %pc = f32[4,8] pad(%c, %zero), padding=0_0_0x7_0_0
  %ab = f32[4,8] add(%pa, %pb)
  %abc = f32[4,8] add(%ab, %pc)
  %pb2 = f32[4,8] pad(%b, %zero), padding=0_0_0x1_4_0
  %overlap = f32[4,8] add(%pa, %pb2)
  ROOT %t = (f32[4,8], f32[4,8]) tuple(%abc, %overlap)
}
)");
  EXPECT_NE(out.find("concatenate(%a, %broadcast"), std::string::npos) << out;
  EXPECT_NE(out.find(", %b, %c), dimensions={1}"), std::string::npos) << out;
  EXPECT_NE(out.find("%overlap = f32[4,8] add(%pa, %pb2)"), std::string::npos) << out;
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

// Two ops that call different computations which compute alike are one op: reductions
// with copies of one combiner, copies of one loop.
TEST(Cse, MergesOpsCallingComputationsThatComputeAlike) {
  const char* module = R"(
module m
%add_a (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%add_b (p: f32[], q: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %q = f32[] parameter(1)
  ROOT %t = f32[] add(%p, %q)
}
%mul (p: f32[], q: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %q = f32[] parameter(1)
  ROOT %t = f32[] multiply(%p, %q)
}
ENTRY %main (x: f32[4,3]) -> (f32[4], f32[4], f32[4]) {
  %x = f32[4,3] parameter(0)
  %z = f32[] constant(0)
  %r1 = f32[4] reduce(%x, %z), dimensions={1}, to_apply=%add_a
  %r2 = f32[4] reduce(%x, %z), dimensions={1}, to_apply=%add_b
  %r3 = f32[4] reduce(%x, %z), dimensions={1}, to_apply=%mul
  ROOT %t = (f32[4], f32[4], f32[4]) tuple(%r1, %r2, %r3)
}
)";
  std::unique_ptr<Module> m = Parse(module);
  EXPECT_TRUE(CsePass().Run(*m));
  const Instruction* root = m->entry()->root();
  EXPECT_EQ(root->operand(0), root->operand(1));
  EXPECT_NE(root->operand(0), root->operand(2));  // a product is not a sum
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

TEST(Simplify, IdempotentOpsOfOneValueAreThatValue) {
  // max(x, x), min(x, x), and(p, p), or(p, p) (loops fuzz seed 5003 made a kernel of one).
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[4], p: pred[4]) -> (f32[4], f32[4], pred[4], pred[4], f32[4]) {
  %x = f32[4] parameter(0)
  %p = pred[4] parameter(1)
  %mx = f32[4] maximum(%x, %x)
  %mn = f32[4] minimum(%x, %x)
  %a = pred[4] and(%p, %p)
  %o = pred[4] or(%p, %p)
  %y = f32[4] maximum(%x, %mn)
  ROOT %t = (f32[4], f32[4], pred[4], pred[4], f32[4]) tuple(%mx, %mn, %a, %o, %y)
}
)");
  SimplifyPass simplify;
  for (int i = 0; i < 2; ++i) simplify.Run(*m);
  VerifyModule(*m);
  const Instruction* root = m->entry()->root();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(root->operand(i)->opcode(), Opcode::kParameter) << m->ToString();
}

TEST(Simplify, AReshapeBackToItsOperandsShapeIsTheOperand) {
  // reshape(reshape(x)) of x's own shape (the dot-layout pass's reshape back meeting the
  // program's, as vmap makes them) is x in one pass: nothing left between a dot and its
  // epilogue.
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[5,4]) -> (f32[5,4], f32[20]) {
  %x = f32[5,4] parameter(0)
  %r1 = f32[5,1,4] reshape(%x)
  %r2 = f32[5,4] reshape(%r1)
  %r3 = f32[20] reshape(%r1)
  ROOT %t = (f32[5,4], f32[20]) tuple(%r2, %r3)
}
)");
  SimplifyPass().Run(*m);
  DcePass().Run(*m);
  VerifyModule(*m);
  const Instruction* root = m->entry()->root();
  EXPECT_EQ(root->operand(0)->name(), "x");
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::kReshape);
  EXPECT_EQ(root->operand(1)->operand(0)->name(), "x");
}

TEST(Simplify, SlicesOfATransposeSliceTheArrayAndTransposeTheSlice) {
  // vmap's [N, R, 4] of an [R, 4, N] pool, sliced for one state value of every lane: the
  // pool's own contiguous [1, 1, N] row, whose transpose only moves ones (a reshape).
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[3,4,8], t: s32[]) -> (f32[8,1,1], f32[8,2,1]) {
  %x = f32[3,4,8] parameter(0)
  %t = s32[] parameter(1)
  %zero = s32[] constant(0)
  %one = s32[] constant(1)
  %tr = f32[8,3,4] transpose(%x), dimensions={2,0,1}
  %ds = f32[8,1,1] dynamic-slice(%tr, %zero, %t, %one), dynamic_slice_sizes={8,1,1}
  %s = f32[8,2,1] slice(%tr), slice={[0:8:1], [1:3:1], [2:3:1]}
  ROOT %out = (f32[8,1,1], f32[8,2,1]) tuple(%ds, %s)
}
)");
  for (int i = 0; i < 2; ++i) {
    SimplifyPass().Run(*m);
    DcePass().Run(*m);
  }
  VerifyModule(*m);
  const Instruction* root = m->entry()->root();
  const Instruction* ds = root->operand(0);
  ASSERT_EQ(ds->opcode(), Opcode::kReshape) << m->ToString();
  ASSERT_EQ(ds->operand(0)->opcode(), Opcode::kDynamicSlice);
  EXPECT_EQ(ds->operand(0)->operand(0)->name(), "x");
  EXPECT_EQ(ds->operand(0)->operand(1)->name(), "t");   // R's start, now first
  EXPECT_EQ(ds->operand(0)->shape().dims(), (std::vector<int64_t>{1, 1, 8}));
  const Instruction* s = root->operand(1);
  ASSERT_EQ(s->opcode(), Opcode::kTranspose);   // [2, 1, 8] -> [8, 2, 1] is not a renaming
  ASSERT_EQ(s->operand(0)->opcode(), Opcode::kSlice);
  EXPECT_EQ(s->operand(0)->shape().dims(), (std::vector<int64_t>{2, 1, 8}));
  EXPECT_EQ(s->operand(0)->attrs().slice.starts, (std::vector<int64_t>{1, 2, 0}));
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

// Arguments for `c`'s parameters: element i of parameter p holds per_parameter * p +
// per_element * i.
std::vector<Literal> RampArguments(const Computation& c, double per_parameter, double per_element) {
  std::vector<Literal> args;
  for (const Instruction* p : c.parameters()) {
    Literal l(p->shape());
    for (int64_t i = 0; i < l.num_elements(); ++i) l.SetDouble(i, per_parameter * p->parameter_number() + per_element * i);
    args.push_back(l);
  }
  return args;
}

// The values of the root tuple's elements, each instruction evaluated in post order with
// the parameters bound to `args`.
std::vector<Literal> EvaluateRootTuple(const Computation& c, const std::vector<Literal>& args) {
  std::map<const Instruction*, Literal> values;
  for (Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter) {
      values.emplace(i, args.at(i->parameter_number()));
    } else if (i->opcode() != Opcode::kTuple) {
      std::vector<const Literal*> ops;
      for (const Instruction* op : i->operands()) ops.push_back(&values.at(op));
      values.emplace(i, *EvaluateInstruction(*i, ops));
    }
  }
  std::vector<Literal> out;
  for (const Instruction* op : c.root()->operands()) out.push_back(values.at(op));
  return out;
}

TEST(Simplify, SlicesOfConstantUpdatesReadTheUpdateOrWhatLiesBelow) {
  // u (2x3) lands at rows 2-3, columns 4-6 of x (6x8); the second update's starts (5, 7)
  // clamp to (4, 5). Each slice reads none of an update, only the update, or some of it.
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[6,8], u: f32[2,3], v: f32[2,3]) -> (f32[2,8], f32[2,3], f32[2,2], f32[2,2], f32[2,2], f32[1,1], f32[2,3], f32[1,8], f32[6,8]) {
  %x = f32[6,8] parameter(0)
  %u = f32[2,3] parameter(1)
  %v = f32[2,3] parameter(2)
  %two = s32[] constant(2)
  %four = s32[] constant(4)
  %five = s32[] constant(5)
  %seven = s32[] constant(7)
  %d = f32[6,8] dynamic-update-slice(%x, %u, %two, %four)
  %e = f32[6,8] dynamic-update-slice(%d, %v, %five, %seven)
  %none = f32[2,8] slice(%e), slice={[0:2:1], [0:8:1]}
  %all = f32[2,3] slice(%e), slice={[2:4:1], [4:7:1]}
  %some = f32[2,2] slice(%e), slice={[2:4:1], [0:8:4]}
  %some2 = f32[2,2] slice(%e), slice={[2:4:1], [1:8:4]}
  %strided_none = f32[2,2] slice(%e), slice={[2:4:1], [3:8:4]}
  %corner = f32[1,1] slice(%e), slice={[3:4:1], [5:6:1]}
  %clamped = f32[2,3] slice(%e), slice={[4:6:1], [5:8:1]}
  %row = f32[1,8] slice(%e), slice={[1:2:1], [0:8:1]}
  ROOT %t = (f32[2,8], f32[2,3], f32[2,2], f32[2,2], f32[2,2], f32[1,1], f32[2,3], f32[1,8], f32[6,8]) tuple(%none, %all, %some, %some2, %strided_none, %corner, %clamped, %row, %e)
}
)");
  std::vector<Literal> args = RampArguments(*m->entry(), 100.0, 1.0);
  std::vector<Literal> before = EvaluateRootTuple(*m->entry(), args);
  SimplifyPass().Run(*m);
  DcePass().Run(*m);
  VerifyModule(*m);
  std::vector<Literal> after = EvaluateRootTuple(*m->entry(), args);
  ASSERT_EQ(before.size(), after.size());
  for (size_t k = 0; k < before.size(); ++k) EXPECT_TRUE(before[k] == after[k]) << k << "\n" << m->ToString();
  // What each slice reads now: x, u, v, or still an update (it reads some of one).
  std::vector<std::string> reads;
  for (const Instruction* s : m->entry()->root()->operands()) {
    const Instruction* from = s->opcode() == Opcode::kSlice ? s->operand(0) : s;
    reads.push_back(from->opcode() == Opcode::kParameter ? from->name() : std::string(OpcodeName(from->opcode())));
  }
  std::vector<std::string> want = {"x", "u", "dynamic-update-slice", "dynamic-update-slice", "x", "u", "v", "x",
                                   "dynamic-update-slice"};
  EXPECT_EQ(reads, want) << m->ToString();
}

TEST(Simplify, TransposesOfProductsOfBroadcastsArePushedIntoTheBroadcasts) {
  // A per-example outer product computed [b, j, i] and transposed to [b, i, j] (a dot
  // without contracting dimensions, as vmap of grad makes it): computed in the result's
  // order. The broadcast of z does not keep its dimensions' order and transposes z (two
  // elements) instead; the iota takes its new dimension; an elementwise value read twice
  // is not pushed (its transpose would be computed beside it).
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[2,3], y: f32[2,4], z: f32[3,4], w: f32[2,3,4]) -> (f32[2,4,3], f32[4,3,2], f32[2,4,3], f32[2,3,4]) {
  %x = f32[2,3] parameter(0)
  %y = f32[2,4] parameter(1)
  %z = f32[3,4] parameter(2)
  %w = f32[2,3,4] parameter(3)
  %bx = f32[2,3,4] broadcast(%x), dimensions={0,1}
  %by = f32[2,3,4] broadcast(%y), dimensions={0,2}
  %io = s32[2,3,4] iota(), iota_dimension=1
  %fi = f32[2,3,4] convert(%io)
  %p = f32[2,3,4] multiply(%bx, %by)
  %q = f32[2,3,4] add(%p, %fi)
  %t1 = f32[2,4,3] transpose(%q), dimensions={0,2,1}
  %bz = f32[2,3,4] broadcast(%z), dimensions={1,2}
  %e = f32[2,3,4] exponential(%bz)
  %t2 = f32[4,3,2] transpose(%e), dimensions={2,1,0}
  %r = f32[2,3,4] subtract(%w, %bx)
  %t3 = f32[2,4,3] transpose(%r), dimensions={0,2,1}
  ROOT %t = (f32[2,4,3], f32[4,3,2], f32[2,4,3], f32[2,3,4]) tuple(%t1, %t2, %t3, %r)
}
)");
  std::vector<Literal> args = RampArguments(*m->entry(), 0.25, 0.01);
  std::vector<Literal> before = EvaluateRootTuple(*m->entry(), args);
  SimplifyPass().Run(*m);
  DcePass().Run(*m);
  VerifyModule(*m);
  std::vector<Literal> after = EvaluateRootTuple(*m->entry(), args);
  for (size_t k = 0; k < before.size(); ++k) EXPECT_TRUE(before[k] == after[k]) << k << "\n" << m->ToString();
  const Instruction* root = m->entry()->root();
  const Instruction* t1 = root->operand(0);
  ASSERT_EQ(t1->opcode(), Opcode::kAdd) << m->ToString();
  EXPECT_EQ(t1->operand(0)->opcode(), Opcode::kMultiply);
  EXPECT_EQ(t1->operand(0)->operand(0)->opcode(), Opcode::kBroadcast);
  EXPECT_EQ(t1->operand(0)->operand(0)->dimensions(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(t1->operand(0)->operand(0)->operand(0)->name(), "x");
  EXPECT_EQ(t1->operand(0)->operand(1)->dimensions(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t1->operand(1)->operand(0)->opcode(), Opcode::kIota);
  EXPECT_EQ(t1->operand(1)->operand(0)->dimensions(), (std::vector<int64_t>{2}));
  const Instruction* t2 = root->operand(1);
  ASSERT_EQ(t2->opcode(), Opcode::kExp) << m->ToString();
  const Instruction* bz = t2->operand(0);
  ASSERT_EQ(bz->opcode(), Opcode::kBroadcast);
  EXPECT_EQ(bz->dimensions(), (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(bz->operand(0)->opcode(), Opcode::kTranspose);
  EXPECT_EQ(bz->operand(0)->operand(0)->name(), "z");
  EXPECT_EQ(root->operand(2)->opcode(), Opcode::kTranspose);
  EXPECT_EQ(root->operand(2)->operand(0), root->operand(3));
}

TEST(Simplify, DynamicSlicesAtConstantStartsAreSlices) {
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[6,8]) -> (f32[2,3], f32[2,3]) {
  %x = f32[6,8] parameter(0)
  %one = s32[] constant(1)
  %big = s32[] constant(100)
  %neg = s32[] constant(-4)
  %a = f32[2,3] dynamic-slice(%x, %one, %big), dynamic_slice_sizes={2,3}
  %b = f32[2,3] dynamic-slice(%x, %neg, %one), dynamic_slice_sizes={2,3}
  ROOT %t = (f32[2,3], f32[2,3]) tuple(%a, %b)
}
)");
  Literal x(m->entry()->parameter(0)->shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) x.SetDouble(i, i);
  std::vector<Literal> before = EvaluateRootTuple(*m->entry(), {x});
  SimplifyPass().Run(*m);
  DcePass().Run(*m);
  VerifyModule(*m);
  std::vector<Literal> after = EvaluateRootTuple(*m->entry(), {x});
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(m->entry()->root()->operand(k)->opcode(), Opcode::kSlice) << m->ToString();
    EXPECT_TRUE(before[k] == after[k]) << k;
  }
  // Clamped as the op clamps: rows 1-2, columns 5-7; rows 0-1, columns 1-3.
  EXPECT_EQ(m->entry()->root()->operand(0)->attrs().slice.starts, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(m->entry()->root()->operand(1)->attrs().slice.starts, (std::vector<int64_t>{0, 1}));
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

TEST(ConstantFolding, LeavesInexactFloatOpsToCompiledCode) {
  // Compiled code computes sin with its own polynomials and sums in its own order; folding
  // with libm and a sequential sum would give other bits for the same program.
  std::unique_ptr<Module> m = Parse(std::string("module m\n") + testing::kF32Combiners + R"(
ENTRY %main () -> (f32[3], f32[], f32[], f32[3]) {
  %c = f32[3] constant({0.5, 1, 2})
  %s = f32[3] sine(%c)
  %z = f32[] constant(0)
  %sum = f32[] reduce(%c, %z), dimensions={0}, to_apply=%add_f32
  %max = f32[] reduce(%c, %z), dimensions={0}, to_apply=%max_f32
  %q = f32[3] sqrt(%c)
  ROOT %t = (f32[3], f32[], f32[], f32[3]) tuple(%s, %sum, %max, %q)
}
)");
  ConstantFoldingPass fold;
  while (fold.Run(*m)) {
  }
  const Instruction* root = m->entry()->root();
  EXPECT_EQ(root->operand(0)->opcode(), Opcode::kSin);
  EXPECT_EQ(root->operand(1)->opcode(), Opcode::kReduce);
  EXPECT_EQ(root->operand(2)->opcode(), Opcode::kConstant);  // max is exact in any order
  EXPECT_EQ(root->operand(3)->opcode(), Opcode::kConstant);  // sqrt is correctly rounded
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

TEST(Evaluator, GatherClampsStartsAndPlacesDimensionsAsXla) {
  const std::string text = R"(
module m

ENTRY %main () -> (f32[3,2], s32[2,2,2]) {
  %x = f32[3,4] constant({{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}})
  %i = s32[2,1] constant({{1}, {-5}})
  %t = f32[3,2] gather(%x, %i), offset_dims={0}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={3,1}
  %y = s32[3,3] constant({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}})
  %w = s32[2,2] constant({{2, 2}, {0, 1}})
  %win = s32[2,2,2] gather(%y, %w), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
  ROOT %r = (f32[3,2], s32[2,2,2]) tuple(%t, %win)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  EXPECT_EQ(Normalize(m->ToString()), Normalize(text));  // prints as it parses
  ConstantFoldingPass fold;
  while (fold.Run(*m)) {
  }
  const Instruction* root = m->entry()->root();
  // Column 1, then column -5 clamped to 0.
  EXPECT_EQ(root->operand(0)->literal().ToString(), "{{1, 0}, {5, 4}, {9, 8}}");
  // A 2x2 window at (2, 2) clamped to (1, 1); one at (0, 1).
  EXPECT_EQ(root->operand(1)->literal().ToString(), "{{{4, 5}, {7, 8}}, {{1, 2}, {4, 5}}}");
}

TEST(Evaluator, ScatterCombinesInOrderAndSkipsWindowsThatDoNotFit) {
  const std::string text = R"(
module m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main () -> (f32[3,2]) {
  %x = f32[3,2] constant({{0, 1}, {2, 3}, {4, 5}})
  %i = s32[4,1] constant({{2}, {0}, {2}, {3}})
  %u = f32[4,2] constant({{10, 20}, {30, 40}, {50, 60}, {70, 80}})
  %s = f32[3,2] scatter(%x, %i, %u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
  ROOT %r = (f32[3,2]) tuple(%s)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  EXPECT_EQ(Normalize(m->ToString()), Normalize(text));
  ConstantFoldingPass fold;
  while (fold.Run(*m)) {
  }
  EXPECT_EQ(m->entry()->root()->operand(0)->literal().ToString(), "{{30, 41}, {2, 3}, {64, 85}}");
}

TEST(ShapeInference, GatherRejectsMismatchedDimensionNumbers) {
  EXPECT_THROW(Parse(R"(
module m
ENTRY %main (x: f32[3,4], i: s32[2,1]) -> (f32[2,4]) {
  %x = f32[3,4] parameter(0)
  %i = s32[2,1] parameter(1)
  %g = f32[2,4] gather(%x, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,4}
  ROOT %r = (f32[2,4]) tuple(%g)
}
)"), Error);
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
  BufferAssignment buffers(*m);
  // %a and %b are temporaries with disjoint lifetimes... %b overlaps %a (read while
  // written), %c can reuse %a's slot: two temp slots of 4 KiB.
  EXPECT_EQ(buffers.temp_bytes(), 2 * 4096) << buffers.ToString();
  const Instruction* d = m->entry()->root()->operand(0);
  EXPECT_EQ(buffers.Get(d).kind, BufferKind::kOutput);
  // Returning a parameter needs a copy into the output buffer.
  ASSERT_EQ(buffers.output_copies().size(), 1u);
  EXPECT_EQ(buffers.output_copies()[0].target.index, 1);
  EXPECT_EQ(buffers.output_copies()[0].source.kind, BufferKind::kParameter);
}

// Regression (loops fuzzer, seed 920494): a loop that reads a temp in place as an unchanged
// state element keeps that temp alive until the loop's result is last read; a later loop
// starting from the same temp must not take it over as its own, updated, state.
TEST(BufferAssignment, ALoopDoesNotTakeOverATempAnEarlierLoopStillPassesOn) {
  // Each loop has a condition of its own (%cond, %cond.1, alike): buffer assignment binds a
  // computation's parameter to one loop.
  std::unique_ptr<Module> m = Parse(R"(
module m
%cond (p: (s32[], f32[2])) -> pred[] {
  %p = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(2)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%same (p: (s32[], f32[2])) -> (s32[], f32[2]) {
  %p = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %z = f32[2] get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[2]) tuple(%next, %z)
}

%cond.1 (p: (s32[], f32[2])) -> pred[] {
  %p = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(2)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%double (p: (s32[], f32[2])) -> (s32[], f32[2]) {
  %p = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %z = f32[2] get-tuple-element(%p), index=1
  %z2 = f32[2] add(%z, %z)
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[2]) tuple(%next, %z2)
}

ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  %b = f32[2] negate(%x)
  %zero = s32[] constant(0)
  %init = (s32[], f32[2]) tuple(%zero, %b)
  %w1 = (s32[], f32[2]) while(%init), condition=%cond, body=%same
  %w2 = (s32[], f32[2]) while(%init), condition=%cond.1, body=%double
  %g1 = f32[2] get-tuple-element(%w1), index=1
  %g2 = f32[2] get-tuple-element(%w2), index=1
  %e = f32[2] exponential(%g2)
  ROOT %r = f32[2] add(%e, %g1)
}
)");
  KernelWrapperPass().Run(*m);
  BufferAssignment buffers(*m);
  const Instruction* add = m->entry()->root();
  const Instruction* w1 = add->operand(1)->operand(0);
  const Instruction* w2 = add->operand(0)->operand(0)->operand(0);
  ASSERT_EQ(w1->opcode(), Opcode::kWhile);
  ASSERT_EQ(w2->opcode(), Opcode::kWhile);
  const BufferSlice& passed_on = buffers.Get(w1, 1);
  const BufferSlice& updated = buffers.Get(w2, 1);
  ASSERT_EQ(passed_on.kind, BufferKind::kTemp) << buffers.ToString();
  ASSERT_EQ(updated.kind, BufferKind::kTemp) << buffers.ToString();
  bool overlap = passed_on.offset < updated.offset + updated.size && updated.offset < passed_on.offset + passed_on.size;
  EXPECT_FALSE(overlap) << buffers.ToString();
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

ENTRY %main (x: f32[3,43862], p: f32[131591], y: f32[65535]) -> (f32[], f32[], f32[]) {
  %x = f32[3,43862] parameter(0)
  %p = f32[131591] parameter(1)
  %y = f32[65535] parameter(2)
  %zero = f32[] constant(0)
  %big = f32[] reduce(%x, %zero), dimensions={0,1}, to_apply=%add
  %prime = f32[] reduce(%p, %zero), dimensions={0}, to_apply=%add
  %small = f32[] reduce(%y, %zero), dimensions={0}, to_apply=%add
  ROOT %t = (f32[], f32[], f32[]) tuple(%big, %prime, %small)
}
)", &changed);
  EXPECT_TRUE(changed);
  // 131586 elements allow 4 blocks; 3 divide them, so no padding.
  EXPECT_NE(out.find("f32[131586] reshape(%x)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[3,43862] reshape("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[3] reduce("), std::string::npos) << out;
  // A prime count: 4 blocks of 32898, the last padded with the init value.
  EXPECT_NE(out.find("f32[131592] pad(%p, %zero), padding=0_1_0"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4,32898] reshape("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4] reduce("), std::string::npos) << out;
  // Under two blocks' worth stays as it is.
  EXPECT_NE(out.find("%small = f32[] reduce(%y, %zero)"), std::string::npos) << out;
  EXPECT_EQ(out.find("%big = "), std::string::npos) << out;
  EXPECT_EQ(out.find("%prime = "), std::string::npos) << out;
}

TEST(TreeReduction, SplitsRowAndColumnReductionsWithFewOutputs) {
  bool changed = false;
  std::string out = RunPass<TreeReductionPass>(R"(
module m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (rows: f32[4,65536], cols: f32[100003,2,32], mid: f32[2,1001,16], many: f32[64,4096], wide: f32[100,4096]) -> (f32[4], f32[2,32], f32[2,16], f32[64], f32[4096]) {
  %rows = f32[4,65536] parameter(0)
  %cols = f32[100003,2,32] parameter(1)
  %mid = f32[2,1001,16] parameter(2)
  %many = f32[64,4096] parameter(3)
  %wide = f32[100,4096] parameter(4)
  %zero = f32[] constant(0)
  %r = f32[4] reduce(%rows, %zero), dimensions={1}, to_apply=%add
  %c = f32[2,32] reduce(%cols, %zero), dimensions={0}, to_apply=%add
  %m = f32[2,16] reduce(%mid, %zero), dimensions={1}, to_apply=%add
  %keep_rows = f32[64] reduce(%many, %zero), dimensions={1}, to_apply=%add
  %keep_cols = f32[4096] reduce(%wide, %zero), dimensions={0}, to_apply=%add
  ROOT %t = (f32[4], f32[2,32], f32[2,16], f32[64], f32[4096]) tuple(%r, %c, %m, %keep_rows, %keep_cols)
}
)", &changed);
  EXPECT_TRUE(changed);
  // Four rows are four units: each row is cut into 8 blocks (n / kBlockElements).
  EXPECT_NE(out.find("f32[4,8,8192] reshape(%rows)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4,8] reduce("), std::string::npos) << out;
  // 64 outputs are one vector of a column reduction: 64 blocks of 1563 rows, padded (the
  // row count is prime).
  EXPECT_NE(out.find("f32[100003,64] reshape(%cols)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[100032,64] pad("), std::string::npos) << out;
  EXPECT_NE(out.find("padding=0_29_0x0_0_0"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[64,1563,64] reshape("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[64,64] reduce("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[2,32] reshape("), std::string::npos) << out;
  // A reduced run in the middle: [2, 1001, 16] in 1 block of 1001 would be no split; 32032
  // elements are under two blocks' worth.
  EXPECT_NE(out.find("%m = f32[2,16] reduce(%mid, %zero)"), std::string::npos) << out;
  // Enough units already: 64 rows, or 64 vectors of columns.
  EXPECT_NE(out.find("%keep_rows = f32[64] reduce(%many, %zero)"), std::string::npos) << out;
  EXPECT_NE(out.find("%keep_cols = f32[4096] reduce(%wide, %zero)"), std::string::npos) << out;
}

TEST(TreeReduction, SplitsAReducedRunBetweenKeptDimensions) {
  std::string out = RunPass<TreeReductionPass>(R"(
module m

%max (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %s = s32[] maximum(%a, %b)
}

ENTRY %main (x: s32[2,300,40,16]) -> s32[2,16] {
  %x = s32[2,300,40,16] parameter(0)
  %low = s32[] constant(-2147483648)
  ROOT %m = s32[2,16] reduce(%x, %low), dimensions={1,2}, to_apply=%max
}
)");
  // [A, R, C] = [2, 12000, 16]: 384000 elements allow 11 blocks; 10 divide 12000.
  EXPECT_NE(out.find("s32[2,12000,16] reshape(%x)"), std::string::npos) << out;
  EXPECT_EQ(out.find("pad("), std::string::npos) << out;
  EXPECT_NE(out.find("s32[2,10,1200,16] reshape("), std::string::npos) << out;
  EXPECT_NE(out.find("s32[2,10,16] reduce("), std::string::npos) << out;
  EXPECT_NE(out.find("ROOT %"), std::string::npos) << out;
  EXPECT_NE(out.find("s32[2,16] reduce("), std::string::npos) << out;
}

TEST(DotLayout, RewritesEveryDotIntoATiledProductAReductionOrAnElementwiseProduct) {
  std::unique_ptr<Module> m = Parse(R"(
module m

ENTRY %main (x: f32[4,32,64], w: f32[64,10], a: f32[300,70], v: f32[70], p: f32[30], q: f32[40], l: f32[33,4,8], r: f32[8,4,40], s: f32[64,64]) -> (f32[4,32,10], f32[300], f32[30,40], f32[33,40], f32[64,64]) {
  %x = f32[4,32,64] parameter(0)
  %w = f32[64,10] parameter(1)
  %a = f32[300,70] parameter(2)
  %v = f32[70] parameter(3)
  %p = f32[30] parameter(4)
  %q = f32[40] parameter(5)
  %l = f32[33,4,8] parameter(6)
  %r = f32[8,4,40] parameter(7)
  %s = f32[64,64] parameter(8)
  %xw = f32[4,32,10] dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %mv = f32[300] dot(%a, %v), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %outer = f32[30,40] dot(%p, %q), lhs_batch_dims={}, lhs_contracting_dims={}, rhs_batch_dims={}, rhs_contracting_dims={}
  %two = f32[33,40] dot(%l, %r), lhs_batch_dims={}, lhs_contracting_dims={1,2}, rhs_batch_dims={}, rhs_contracting_dims={1,0}
  %plain = f32[64,64] dot(%s, %s), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  ROOT %t = (f32[4,32,10], f32[300], f32[30,40], f32[33,40], f32[64,64]) tuple(%xw, %mv, %outer, %two, %plain)
}
)");
  DotLayoutPass pass(/*lanes=*/16);
  EXPECT_TRUE(pass.Run(*m));
  VerifyModule(*m);
  std::string out = m->ToString();
  auto has = [&](const std::string& s) { return out.find(s) != std::string::npos; };
  // x @ w over x [4, 32, 64]: x flattened to rows (a reshape), w's 10 columns padded to 16
  // (a power of two below the lanes), the product sliced and reshaped back.
  EXPECT_TRUE(has("f32[128,64] reshape(%x)")) << out;
  EXPECT_TRUE(has("f32[64,16] pad(%w, ")) << out;
  EXPECT_TRUE(has("f32[128,16] dot(")) << out;
  EXPECT_TRUE(has("f32[128,10] slice(")) << out;
  EXPECT_TRUE(has("f32[4,32,10] reshape(")) << out;
  // A matrix-vector product: a row reduction of the rows times the broadcast vector.
  EXPECT_TRUE(has("f32[300,70] broadcast(%v)")) << out;
  EXPECT_TRUE(has("f32[300] reduce(")) << out;
  // An outer product: no sums.
  EXPECT_TRUE(has("f32[30,40] multiply(")) << out;
  EXPECT_TRUE(has("f32[30,40] broadcast(%p), dimensions={0}")) << out;
  // Two contracting dimensions paired crosswise: r transposed so that they pair in order,
  // both operands flattened to one contracting dimension of 32; 40 columns padded to 48
  // (whole vectors; a whole span of 64 would pad more than it leaves over).
  EXPECT_TRUE(has("f32[4,8,40] transpose(%r), dimensions={1,0,2}")) << out;
  EXPECT_TRUE(has("f32[33,32] reshape(%l)")) << out;
  EXPECT_TRUE(has("f32[33,48] dot(")) << out;
  // Already the tiled layout, whole vectors: untouched.
  EXPECT_TRUE(has("%plain = f32[64,64] dot(%s, %s)")) << out;
  for (const char* gone : {"%xw = ", "%mv = ", "%outer = ", "%two = "}) EXPECT_FALSE(has(gone)) << gone << out;
  // Without lanes (the GPU): no padding.
  std::unique_ptr<Module> g = Parse(R"(
module g

ENTRY %main (x: f32[128,64], w: f32[64,10]) -> f32[128,10] {
  %x = f32[128,64] parameter(0)
  %w = f32[64,10] parameter(1)
  ROOT %xw = f32[128,10] dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
}
)");
  EXPECT_FALSE(DotLayoutPass(/*lanes=*/1).Run(*g));
}

}  // namespace

}  // namespace fj
