// Fusion passes on IR text: the paper's Fig. 1 patterns (a) instruction fusion, (b) fusion
// merger, (c) multi-output fusion, (d) horizontal fusion, and the rules of each profile.
#include <gtest/gtest.h>

#include "fusion/fusion_merger.h"
#include "fusion/fusible.h"
#include "fusion/fusion_pipeline.h"
#include "fusion/fusion_utils.h"
#include "fusion/instruction_fusion.h"
#include "fusion/multi_output_fusion.h"
#include "passes/dce.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Parse;

int CountKernels(const Module& m) {
  int n = 0;
  for (const Instruction* i : m.entry()->MakePostOrder()) n += i->opcode() == Opcode::kFusion;
  return n;
}

std::unique_ptr<Module> Fuse(const std::string& text, const std::string& profile, FusionLog* log) {
  std::unique_ptr<Module> m = Parse(text);
  Pipeline p("fusion");
  AddFusionPasses(p, GetFusionProfile(profile), log);
  p.Run(*m);
  VerifyModule(*m);
  return m;
}

const FusionLogEntry* FindRefusal(const FusionLog& log, const std::string& producer, const std::string& rule) {
  for (const FusionLogEntry& e : log.entries()) {
    if (!e.decision.fuse && e.producer == producer && e.decision.rule == rule) return &e;
  }
  return nullptr;
}

// Fusing into a kernel in place (FuseIntoFusion, linear in the producer's size) gives the
// kernel a rebuild would: operands shared, parameters renumbered, a duplicated producer kept
// for its other users, and emitted counts kept up to date (equal to counts made afresh).
TEST(InstructionFusion, FusesIntoAKernelInPlace) {
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[64], y: f32[64]) -> (f32[64], f32[64]) {
  %x = f32[64] parameter(0)
  %y = f32[64] parameter(1)
  %e = f32[64] exponential(%x)
  %n = f32[64] negate(%y)
  %a = f32[64] add(%e, %n)
  %r = f32[64] reverse(%e), dimensions={0}
  %b = f32[64] multiply(%a, %r)
  ROOT %t = (f32[64], f32[64]) tuple(%b, %n)
}
)");
  auto find = [&](const std::string& name) -> Instruction* {
    for (Instruction* i : m->entry()->MakePostOrder()) {
      if (i->name() == name) return i;
    }
    return nullptr;
  };
  Instruction* x = find("x");
  Instruction* kernel = WrapInFusion(find("b"));
  const Computation& fused = *kernel->fused_computation();
  std::vector<int> counts;
  {
    EmittedCountCache cache;
    ASSERT_EQ(FuseIntoFusion(find("r"), kernel, false), kernel);
    ASSERT_EQ(FuseIntoFusion(find("a"), kernel, false), kernel);
    ASSERT_EQ(FuseIntoFusion(find("n"), kernel, /*duplicate=*/true), kernel);
    ASSERT_EQ(FuseIntoFusion(find("e"), kernel, false), kernel);
    for (int i = 0; i < kernel->operand_count(); ++i) counts.push_back(EmittedCount(fused, fused.parameter(i)));
  }
  VerifyModule(*m);
  // Two operands, x and y, each bound to the parameter of its slot.
  ASSERT_EQ(kernel->operand_count(), 2) << m->ToString();
  EXPECT_EQ(fused.num_parameters(), 2);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(fused.parameter(i)->parameter_number(), i);
  EXPECT_NE(kernel->operand(0), kernel->operand(1));
  // %n stays for the tuple; %e, %a, %r are gone from the entry.
  EXPECT_NE(find("n"), nullptr);
  EXPECT_EQ(find("e"), nullptr);
  EXPECT_EQ(find("a"), nullptr);
  EXPECT_EQ(fused.instruction_count(), 2 + 5) << fused.ToString();
  EXPECT_EQ(kernel->fusion_kind(), FusionKind::kLoop);
  // x is read at its own index (through add) and reversed: emitted twice; y once.
  int at_x = kernel->operand(0) == x ? 0 : 1;
  EXPECT_EQ(counts[at_x], 2);
  EXPECT_EQ(counts[1 - at_x], 1);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(counts[i], EmittedCount(fused, fused.parameter(i)));
}

// (a) Instruction fusion: an elementwise chain becomes one kernel.
TEST(InstructionFusion, ChainBecomesOneKernel) {
  const char* text = R"(
module m
ENTRY %main (x: f32[1024]) -> (f32[1024]) {
  %x = f32[1024] parameter(0)
  %e = f32[1024] exponential(%x)
  %n = f32[1024] negate(%e)
  %one = f32[] constant(1)
  %b = f32[1024] broadcast(%one), dimensions={}
  %a = f32[1024] add(%n, %b)
  ROOT %t = (f32[1024]) tuple(%a)
}
)";
  for (const char* profile : {"xla", "xla+concat", "fusionjit"}) {
    FusionLog log;
    std::unique_ptr<Module> m = Fuse(text, profile, &log);
    EXPECT_EQ(CountKernels(*m), 1) << profile << "\n" << m->ToString();
  }
  FusionLog log;
  EXPECT_EQ(CountKernels(*Fuse(text, "none", &log)), 4);
}

// The concatenate with two users: XLA keeps it (code duplication), the paper's patch fuses
// it into up to three consumers.
const char* kConcatTwoUsers = R"(
module m
ENTRY %main (x: f32[512], y: f32[512]) -> (f32[1024], f32[1024]) {
  %x = f32[512] parameter(0)
  %y = f32[512] parameter(1)
  %c = f32[1024] concatenate(%x, %y), dimensions={0}
  %s = f32[1024] sine(%c)
  %k = f32[1024] cosine(%c)
  ROOT %t = (f32[1024], f32[1024]) tuple(%s, %k)
}
)";

TEST(InstructionFusion, XlaDoesNotFuseAConcatenateWithTwoUsers) {
  FusionLog log;
  std::unique_ptr<Module> m = Fuse(kConcatTwoUsers, "xla", &log);
  const FusionLogEntry* e = FindRefusal(log, "c", "concat-multi-user");
  ASSERT_NE(e, nullptr) << log.ToString();
  EXPECT_NE(e->decision.reason.find("has 2 users"), std::string::npos) << e->decision.reason;
  EXPECT_NE(e->decision.reason.find("more than 1 user"), std::string::npos) << e->decision.reason;
}

TEST(InstructionFusion, PatchedXlaFusesTheConcatenateIntoBothUsers) {
  FusionLog log;
  std::unique_ptr<Module> m = Fuse(kConcatTwoUsers, "xla+concat", &log);
  // Each consumer computes the concatenation itself: no concatenate kernel is left.
  for (const Instruction* i : m->entry()->MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion) continue;
    EXPECT_NE(i->opcode(), Opcode::kConcatenate);
  }
  EXPECT_EQ(FindRefusal(log, "c", "concat-multi-user"), nullptr) << log.ToString();
}

TEST(InstructionFusion, ExpensiveOpsAreNotDuplicatedByXla) {
  const char* text = R"(
module m
ENTRY %main (x: f32[64]) -> (f32[64], f32[64]) {
  %x = f32[64] parameter(0)
  %e = f32[64] tanh(%x)
  %a = f32[64] negate(%e)
  %b = f32[64] abs(%e)
  ROOT %t = (f32[64], f32[64]) tuple(%a, %b)
}
)";
  FusionLog log;
  Fuse(text, "xla", &log);
  EXPECT_NE(FindRefusal(log, "e", "expensive-duplication"), nullptr) << log.ToString();
}

TEST(InstructionFusion, LargeConstantsStayInMemory) {
  const char* text = R"(
module m
ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4] parameter(0)
  %c = f32[4] constant({1, 2, 3, 4})
  %a = f32[4] add(%x, %c)
  ROOT %t = (f32[4]) tuple(%a)
}
)";
  FusionLog log;
  std::unique_ptr<Module> m = Fuse(text, "xla", &log);
  EXPECT_NE(FindRefusal(log, "c", "large-constant"), nullptr) << log.ToString();
  EXPECT_EQ(CountKernels(*m), 1);
}

TEST(InstructionFusion, CustomCallsAreBarriers) {
  const char* text = R"(
module m
ENTRY %main (x: u32[8]) -> (u32[8]) {
  %x = u32[8] parameter(0)
  %r = u32[8] custom-call(%x), custom_call_target="threefry2x32"
  %n = u32[8] not(%r)
  ROOT %t = (u32[8]) tuple(%n)
}
)";
  FusionLog log;
  Fuse(text, "fusionjit", &log);
  const FusionLogEntry* e = FindRefusal(log, "r", "custom-call-barrier");
  ASSERT_NE(e, nullptr) << log.ToString();
  EXPECT_NE(e->decision.reason.find("threefry2x32"), std::string::npos);
}

TEST(InstructionFusion, ReductionEpilogueOnlyInTheFusionjitProfile) {
  const char* text = R"(
module m
%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[64,128]) -> (f32[64]) {
  %x = f32[64,128] parameter(0)
  %z = f32[] constant(0)
  %r = f32[64] reduce(%x, %z), dimensions={1}, to_apply=%add_f32
  %s = f32[64] sqrt(%r)
  ROOT %t = (f32[64]) tuple(%s)
}
)";
  FusionLog xla_log, fj_log;
  EXPECT_EQ(CountKernels(*Fuse(text, "xla", &xla_log)), 2);
  EXPECT_NE(FindRefusal(xla_log, "r", "reduction-epilogue"), nullptr);
  EXPECT_EQ(CountKernels(*Fuse(text, "fusionjit", &fj_log)), 1);
}

TEST(InstructionFusion, SizeBudgetLimitsOperands) {
  // 70 parameters summed pairwise into one value: more than XLA's 64 operands per fusion.
  std::string text = "module m\nENTRY %main (";
  for (int i = 0; i < 70; ++i) text += (i ? ", " : "") + std::string("p") + std::to_string(i) + ": f32[8]";
  text += ") -> (f32[8]) {\n";
  for (int i = 0; i < 70; ++i) text += "  %p" + std::to_string(i) + " = f32[8] parameter(" + std::to_string(i) + ")\n";
  std::string prev = "p0";
  for (int i = 1; i < 70; ++i) {
    text += "  %s" + std::to_string(i) + " = f32[8] add(%" + prev + ", %p" + std::to_string(i) + ")\n";
    prev = "s" + std::to_string(i);
  }
  text += "  ROOT %t = (f32[8]) tuple(%" + prev + ")\n}\n";
  FusionLog log;
  std::unique_ptr<Module> m = Fuse(text, "xla", &log);
  bool found = false;
  for (const FusionLogEntry& e : log.entries()) found = found || e.decision.rule == "size-budget";
  EXPECT_TRUE(found) << log.ToString();
  EXPECT_GE(CountKernels(*m), 2);
}

// A kernel that grows by a chain of fusible adds, each bringing in an exponential it must
// refuse (the exponential is also an output, and XLA's first pass does not duplicate): each
// refused producer is asked once per sweep over the kernel's producers, not again after
// every fusion (that was quadratic: 260,000 questions for a 32-step unrolled scan).
TEST(InstructionFusion, RefusedProducersAreNotAskedAgainAfterEveryFusion) {
  constexpr int kTerms = 30;
  std::string text = "module m\nENTRY %main (";
  for (int i = 0; i < kTerms; ++i) text += (i ? ", " : "") + std::string("p") + std::to_string(i) + ": f32[8]";
  text += ") -> (f32[8]";
  for (int i = 0; i < kTerms; ++i) text += ", f32[8]";
  text += ") {\n";
  // Each exponential defined just before the add that reads it: later in the post order
  // than the sum so far, so asked before it.
  std::string outputs, prev;
  for (int i = 0; i < kTerms; ++i) {
    std::string n = std::to_string(i);
    text += "  %p" + n + " = f32[8] parameter(" + n + ")\n  %e" + n + " = f32[8] exponential(%p" + n + ")\n";
    outputs += ", %e" + n;
    if (i > 0) text += "  %s" + n + " = f32[8] add(%" + prev + ", %e" + n + ")\n";
    prev = i > 0 ? "s" + n : "e0";
  }
  text += "  ROOT %t = (f32[8]";
  for (int i = 0; i < kTerms; ++i) text += ", f32[8]";
  text += ") tuple(%" + prev + outputs + ")\n}\n";
  std::unique_ptr<Module> m = Parse(text);
  FusionLog log;
  InstructionFusionPass pass(GetFusionProfile("xla"), &log, /*may_duplicate=*/false);
  {
    EmittedCountCache counts;
    pass.Run(*m);
  }
  VerifyModule(*m);
  // The adds are one kernel; each exponential stays outside it, refused with its reason.
  EXPECT_EQ(CountKernels(*m), 1) << m->ToString();
  EXPECT_EQ(m->entry()->root()->operand(0)->operand_count(), kTerms) << m->ToString();
  EXPECT_NE(FindRefusal(log, "e5", "no-duplication"), nullptr) << log.ToString();
  // Two sweeps over the sum's kernel (one that fuses, one that confirms), plus each
  // exponential's own parameter: linear in the terms (asked after every fusion: ~kTerms^2/2).
  EXPECT_LE(pass.questions(), 4 * kTerms) << pass.questions();
}

// (b) Fusion merger: a loop fusion merges into all its users when bytes do not grow.
TEST(FusionMerger, MergesIntoAllUsersOrNone) {
  const char* text = R"(
module m
%fp (p: f32[256]) -> f32[256] {
  %p = f32[256] parameter(0)
  ROOT %n = f32[256] negate(%p)
}
%fa (q: f32[256]) -> f32[256] {
  %q = f32[256] parameter(0)
  ROOT %a = f32[256] abs(%q)
}
%fb (r: f32[256]) -> f32[256] {
  %r = f32[256] parameter(0)
  ROOT %e = f32[256] floor(%r)
}
ENTRY %main (x: f32[256]) -> (f32[256], f32[256]) {
  %x = f32[256] parameter(0)
  %producer = f32[256] fusion(%x), kind=kLoop, calls=%fp
  %u1 = f32[256] fusion(%producer), kind=kLoop, calls=%fa
  %u2 = f32[256] fusion(%producer), kind=kLoop, calls=%fb
  ROOT %t = (f32[256], f32[256]) tuple(%u1, %u2)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  FusionLog log;
  FusionMergerPass merger(GetFusionProfile("xla"), &log);
  EXPECT_TRUE(merger.Run(*m)) << log.ToString();
  DcePass().Run(*m);
  VerifyModule(*m);
  // Two kernels left, each computing negate itself.
  EXPECT_EQ(CountKernels(*m), 2) << m->ToString();
  for (const Instruction* k : m->entry()->MakePostOrder()) {
    if (k->opcode() != Opcode::kFusion) continue;
    bool has_negate = false;
    for (const Instruction* i : k->fused_computation()->MakePostOrder()) has_negate |= i->opcode() == Opcode::kNegate;
    EXPECT_TRUE(has_negate);
  }
}

TEST(FusionMerger, RefusesWhenBytesWouldGrow) {
  // The producer reads a large array and writes a small slice: merging it into three users
  // would read the large array three times.
  const char* text = R"(
module m
%fp (p: f32[4096]) -> f32[64] {
  %p = f32[4096] parameter(0)
  %e = f32[4096] negate(%p)
  ROOT %s = f32[64] slice(%e), slice={[0:4096:64]}
}
%fa (q: f32[64]) -> f32[64] {
  %q = f32[64] parameter(0)
  ROOT %a = f32[64] abs(%q)
}
%fb (r: f32[64]) -> f32[64] {
  %r = f32[64] parameter(0)
  ROOT %f = f32[64] floor(%r)
}
%fc (r: f32[64]) -> f32[64] {
  %r = f32[64] parameter(0)
  ROOT %f = f32[64] ceil(%r)
}
ENTRY %main (x: f32[4096]) -> (f32[64], f32[64], f32[64]) {
  %x = f32[4096] parameter(0)
  %producer = f32[64] fusion(%x), kind=kLoop, calls=%fp
  %u1 = f32[64] fusion(%producer), kind=kLoop, calls=%fa
  %u2 = f32[64] fusion(%producer), kind=kLoop, calls=%fb
  %u3 = f32[64] fusion(%producer), kind=kLoop, calls=%fc
  ROOT %t = (f32[64], f32[64], f32[64]) tuple(%u1, %u2, %u3)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  FusionLog log;
  FusionMergerPass merger(GetFusionProfile("xla"), &log);
  EXPECT_FALSE(merger.Run(*m)) << log.ToString();
  const FusionLogEntry* e = FindRefusal(log, "s", "bytes-ratio");
  ASSERT_NE(e, nullptr) << log.ToString();
  EXPECT_GT(e->decision.bytes_fused, e->decision.bytes_unfused);
}

// (c) Multi-output fusion: siblings reading the same input become one kernel.
TEST(MultiOutputFusion, SiblingsShareOneRead) {
  const char* text = R"(
module m
ENTRY %main (x: f32[1024], y: f32[1024]) -> (f32[1024], f32[1024]) {
  %x = f32[1024] parameter(0)
  %y = f32[1024] parameter(1)
  %a = f32[1024] multiply(%x, %y)
  %e = f32[1024] negate(%x)
  %b = f32[1024] add(%e, %y)
  ROOT %t = (f32[1024], f32[1024]) tuple(%a, %b)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  FusionLog log;
  FusionProfile xla = GetFusionProfile("xla");
  InstructionFusionPass(xla, &log, false).Run(*m);
  MultiOutputFusionPass(xla, &log).Run(*m);
  DcePass().Run(*m);
  VerifyModule(*m);
  EXPECT_EQ(CountKernels(*m), 1) << m->ToString() << log.ToString();
  const Instruction* k = nullptr;
  for (const Instruction* i : m->entry()->MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion) k = i;
  }
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->shape().IsTuple());
  EXPECT_EQ(k->operand_count(), 2);  // x and y, each read once
}

TEST(MultiOutputFusion, NeverCreatesACycle) {
  // %b depends on %a through %m (not fusible: a dot), so %a and %b are not siblings to fuse.
  const char* text = R"(
module m
ENTRY %main (x: f32[8,8]) -> (f32[8,8], f32[8,8]) {
  %x = f32[8,8] parameter(0)
  %a = f32[8,8] negate(%x)
  %m = f32[8,8] dot(%a, %a), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %b = f32[8,8] add(%x, %m)
  ROOT %t = (f32[8,8], f32[8,8]) tuple(%a, %b)
}
)";
  FusionLog log;
  std::unique_ptr<Module> m = Fuse(text, "xla", &log);
  EXPECT_NE(FindRefusal(log, "a", "cycle"), nullptr) << log.ToString();
}

// (d) Horizontal fusion: independent small kernels of different shapes in one launch.
TEST(HorizontalFusion, IndependentOutputsOfDifferentShapesShareALaunch) {
  const char* text = R"(
module m
ENTRY %main (x: f32[100], y: f32[7,3]) -> (f32[100], f32[7,3]) {
  %x = f32[100] parameter(0)
  %y = f32[7,3] parameter(1)
  %a = f32[100] sine(%x)
  %b = f32[7,3] cosine(%y)
  ROOT %t = (f32[100], f32[7,3]) tuple(%a, %b)
}
)";
  FusionLog log;
  std::unique_ptr<Module> m = Fuse(text, "xla", &log);
  EXPECT_EQ(CountKernels(*m), 1) << m->ToString();
  FusionLog none_log;
  EXPECT_EQ(CountKernels(*Fuse(text, "none", &none_log)), 2);
}

}  // namespace
}  // namespace fj
