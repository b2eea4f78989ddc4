// The IR: text round trip (golden file), printer details, parser errors, and the
// verifier's rejection of malformed IR.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/builder.h"
#include "ir/dot_printer.h"
#include "support/error.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Normalize;
using testing::Parse;
using testing::ReadGolden;

TEST(IrText, GoldenRoundTripIsExact) {
  std::string text = ReadGolden("elementwise.fjir");
  ASSERT_FALSE(text.empty());
  std::unique_ptr<Module> m = Parse(text);
  EXPECT_EQ(Normalize(m->ToString()), Normalize(text));
  // Printing the parse of the print is a fixed point.
  EXPECT_EQ(Parse(m->ToString())->ToString(), m->ToString());
}

TEST(IrText, ScatterHintsRoundTrip) {
  const std::string text =
      "module m\n\n"
      "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(%a, %b)\n}\n\n"
      "ENTRY %main (x: f32[8], i: s32[3,1], u: f32[3]) -> f32[8] {\n"
      "  %x = f32[8] parameter(0)\n  %i = s32[3,1] parameter(1)\n  %u = f32[3] parameter(2)\n"
      "  ROOT %y = f32[8] scatter(%x, %i, %u), update_window_dims={}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=1, indices_are_sorted=true, unique_indices=true, "
      "to_apply=%add\n}\n";
  std::unique_ptr<Module> m = Parse(text);
  const ScatterDims& s = m->entry()->root()->attrs().scatter;
  EXPECT_TRUE(s.unique_indices);
  EXPECT_TRUE(s.indices_are_sorted);
  EXPECT_EQ(Parse(m->ToString())->ToString(), m->ToString());
  EXPECT_NE(m->ToString().find("unique_indices=true"), std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("unique_indices=true"), 19, "unique_indices=yes");
  EXPECT_THROW(Parse(bad), Error);
}

TEST(IrText, CloneIsDeepAndEqual) {
  std::unique_ptr<Module> m = Parse(ReadGolden("elementwise.fjir"));
  std::unique_ptr<Module> c = m->Clone();
  EXPECT_EQ(c->ToString(), m->ToString());
  EXPECT_NE(c->entry(), m->entry());
}

TEST(IrText, NanLiteralsRoundTripByTheirBits) {
  std::string text = R"(
module nans

ENTRY %main () -> (f32[3], f16[2], f64[2]) {
  %a = f32[3] constant({nan, nan_0x7fc00001, nan_0xffc00000})
  %b = f16[2] constant({nan, nan_0x7e01})
  %c = f64[2] constant({nan_0x7ff8000000000001, nan})
  ROOT %t = (f32[3], f16[2], f64[2]) tuple(%a, %b, %c)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  const Literal& a = m->entry()->root()->operand(0)->literal();
  EXPECT_EQ(a.GetUint64(0), 0x7fc00000u);
  EXPECT_EQ(a.GetUint64(1), 0x7fc00001u);
  EXPECT_EQ(a.GetUint64(2), 0xffc00000u);
  EXPECT_EQ(m->entry()->root()->operand(1)->literal().GetUint64(1), 0x7e01u);
  EXPECT_EQ(m->entry()->root()->operand(2)->literal().GetUint64(0), 0x7ff8000000000001ull);
  EXPECT_EQ(Normalize(m->ToString()), Normalize(text));
  EXPECT_THROW(Parse("module m\n\nENTRY %main () -> f32[] {\n  ROOT %a = f32[] constant(nan_0x)\n}\n"), Error);
}

TEST(IrText, StructuralTextIgnoresNamesAndSourcesOnly) {
  // The text that decides whether two kernels are one function: a renamed copy with other
  // source locations shares it; any change to what is computed does not.
  auto text = [](const std::string& combiner_op, const std::string& constant, const std::string& operands,
                 const std::string& names) {
    std::string n = names;
    return "module m" + n + "\n\n%comb" + n + " (a" + n + ": f32[], b" + n + ": f32[]) -> f32[] {\n" +
           "  %a" + n + " = f32[] parameter(0)\n  %b" + n + " = f32[] parameter(1)\n" +
           "  ROOT %s" + n + " = f32[] " + combiner_op + "(%a" + n + ", %b" + n + ")\n}\n\n" +
           "ENTRY %main" + n + " (x" + n + ": f32[4,3]) -> f32[4] {\n" +
           "  %x" + n + " = f32[4,3] parameter(0)\n" +
           "  %c" + n + " = f32[] constant(" + constant + ")\n" +
           "  %bc" + n + " = f32[4,3] broadcast(%c" + n + "), dimensions={}, source=\"f" + n + ".py:3\"\n" +
           "  %m" + n + " = f32[4,3] multiply(" + operands + "), source=\"f" + n + ".py:4\"\n" +
           "  %z" + n + " = f32[] constant(0)\n" +
           "  ROOT %r" + n + " = f32[4] reduce(%m" + n + ", %z" + n + "), dimensions={1}, to_apply=%comb" + n + "\n}\n";
  };
  auto structure = [&](const std::string& op, const std::string& constant, bool swapped, const std::string& names) {
    std::string operands = swapped ? "%bc" + names + ", %x" + names : "%x" + names + ", %bc" + names;
    return Parse(text(op, constant, operands, names))->entry()->StructuralText();
  };
  std::string base = structure("add", "2", false, "");
  EXPECT_EQ(base, structure("add", "2", false, "_renamed"));
  EXPECT_NE(base, structure("multiply", "2", false, ""));   // the combiner
  EXPECT_NE(base, structure("add", "3", false, ""));        // a constant
  EXPECT_NE(structure("add", "0", false, ""), structure("add", "-0", false, ""));  // its bits
  EXPECT_NE(base, structure("add", "2", true, ""));         // operand order
  EXPECT_EQ(base.find("source"), std::string::npos);
  EXPECT_EQ(base.find("%"), std::string::npos) << base;
}

TEST(IrText, CloneIsNamedNumberedAndLinkedAsAParseOfTheText) {
  std::string text = std::string("module loops\n") + testing::kF32Combiners + R"(
%fused (p: f32[64]) -> f32[] {
  %p = f32[64] parameter(0)
  %k = f32[64] constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64})
  %m = f32[64] multiply(%p, %k)
  %zero = f32[] constant(0)
  ROOT %r = f32[] reduce(%m, %zero), dimensions={0}, to_apply=%add_f32
}

%cond (s: (s32[], f32[64])) -> pred[] {
  %s = (s32[], f32[64]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (s: (s32[], f32[64])) -> (s32[], f32[64]) {
  %s = (s32[], f32[64]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %v = f32[64] get-tuple-element(%s), index=1
  %w = f32[64] add(%v, %v)
  ROOT %t = (s32[], f32[64]) tuple(%j, %w)
}

ENTRY %main (x: f32[64]) -> (f32[]) {
  %x = f32[64] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[64]) tuple(%zero, %x)
  %loop = (s32[], f32[64]) while(%init), condition=%cond, body=%body
  %v = f32[64] get-tuple-element(%loop), index=1
  %f = f32[] fusion(%v), kind=kInput, calls=%fused
  ROOT %out = (f32[]) tuple(%f)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  std::unique_ptr<Module> c = m->Clone();
  std::unique_ptr<Module> p = Parse(m->ToString());
  EXPECT_EQ(c->ToString(), m->ToString());
  std::vector<Computation*> cs = c->MakeComputationPostOrder(), ps = p->MakeComputationPostOrder();
  ASSERT_EQ(cs.size(), ps.size());
  for (size_t k = 0; k < cs.size(); ++k) {
    EXPECT_EQ(cs[k]->name(), ps[k]->name());
    std::vector<Instruction*> ci = cs[k]->MakePostOrder(), pi = ps[k]->MakePostOrder();
    ASSERT_EQ(ci.size(), pi.size());
    for (size_t i = 0; i < ci.size(); ++i) {
      EXPECT_EQ(ci[i]->name(), pi[i]->name());
      EXPECT_EQ(ci[i]->unique_id(), pi[i]->unique_id()) << ci[i]->name();  // passes order by id
      for (size_t j = 0; j < ci[i]->called_computations().size(); ++j) {
        EXPECT_EQ(ci[i]->called_computations()[j]->parent(), c.get());  // the copy's own
        EXPECT_EQ(ci[i]->called_computations()[j]->name(), pi[i]->called_computations()[j]->name());
      }
    }
  }
  const Instruction* fusion = c->entry()->root()->operand(0);
  ASSERT_EQ(fusion->opcode(), Opcode::kFusion);
  EXPECT_EQ(fusion->fused_computation()->fusion_instruction(), fusion);
  // Constants are immutable: the copy shares them (no copy of closed-over weights).
  const Instruction* k = m->FindComputation("fused")->root()->operand(0)->operand(1);
  const Instruction* ck = fusion->fused_computation()->root()->operand(0)->operand(1);
  EXPECT_EQ(&ck->literal(), &k->literal());
}

TEST(IrText, FloatLiteralsRoundTripExactly) {
  std::string text = R"(
module floats

ENTRY %main () -> (f32[4], f64[3]) {
  %a = f32[4] constant({0.1, 3.4028235e+38, 1e-45, -0})
  %b = f64[3] constant({0.1, 2.2250738585072014e-308, -inf})
  ROOT %t = (f32[4], f64[3]) tuple(%a, %b)
}
)";
  std::unique_ptr<Module> m = Parse(text);
  const Literal& a = m->entry()->root()->operand(0)->literal();
  EXPECT_EQ(a.GetDouble(0), static_cast<double>(0.1f));
  EXPECT_EQ(a.GetDouble(2), static_cast<double>(1e-45f));
  EXPECT_TRUE(std::signbit(a.GetDouble(3)));
  const Literal& b = m->entry()->root()->operand(1)->literal();
  EXPECT_EQ(b.GetDouble(0), 0.1);
  EXPECT_EQ(b.GetDouble(1), 2.2250738585072014e-308);
  EXPECT_EQ(Normalize(m->ToString()), Normalize(text));
}

TEST(ShapeInference, DimensionArithmeticNeverOverflows) {
  // A stride near 2^63 takes the first element (it overflowed to an empty slice).
  std::unique_ptr<Module> m = Parse(R"(
module m
ENTRY %main (x: f32[8]) -> (f32[1]) {
  %x = f32[8] parameter(0)
  %s = f32[1] slice(%x), slice={[0:4:9223372036854775807]}
  ROOT %t = (f32[1]) tuple(%s)
}
)");
  EXPECT_EQ(m->entry()->root()->operand(0)->shape().dim(0), 1);
  // Sizes that do not fit in int64 are errors, not wrapped-around dimensions.
  EXPECT_THROW(Parse(R"(
module m
ENTRY %main (x: f32[3]) -> (f32[]) {
  %x = f32[3] parameter(0)
  %z = f32[] constant(0)
  %p = f32[1] pad(%x, %z), padding=4611686018427387903_4611686018427387903_0
  ROOT %t = (f32[]) tuple(%z)
}
)"),
               Error);
  EXPECT_THROW(CheckArraySize(Shape(DType::kF64, {1ll << 31, 1ll << 31}), "test"), Error);
}

TEST(IrText, ParseErrorsNameLineAndColumn) {
  try {
    ParseModule("module m\nENTRY %main () -> f32[] {\n  ROOT %x = f32[] frobnicate()\n}\n");
    FAIL() << "expected a parse error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("line 3"), std::string::npos) << what;
    EXPECT_NE(what.find("unknown opcode 'frobnicate'"), std::string::npos) << what;
  }
}

TEST(IrText, ParserRejectsUndefinedValues) {
  EXPECT_THROW(ParseModule("module m\nENTRY %main () -> f32[] {\n  ROOT %y = f32[] negate(%x)\n}\n"),
               Error);
}

TEST(IrText, ParserRejectsWrongConstantSize) {
  EXPECT_THROW(ParseModule("module m\nENTRY %main () -> f32[2] {\n  ROOT %c = f32[2] constant({1, 2, 3})\n}\n"),
               Error);
}

// The verifier rejects each kind of malformed IR.
void ExpectRejected(const std::string& text, const std::string& needle) {
  std::unique_ptr<Module> m = ParseModule(text);
  try {
    VerifyModule(*m);
    FAIL() << "verifier accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Verifier, RejectsWrongResultShape) {
  ExpectRejected(R"(module m
ENTRY %main (x: f32[4]) -> f32[5] {
  %x = f32[4] parameter(0)
  ROOT %n = f32[5] negate(%x)
})",
                 "should be f32[4]");
}

TEST(Verifier, RejectsMismatchedBinaryOperands) {
  ExpectRejected(R"(module m
ENTRY %main (x: f32[4], y: s32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %y = s32[4] parameter(1)
  ROOT %a = f32[4] add(%x, %y)
})",
                 "same shape and element type");
}

TEST(Verifier, RejectsTranscendentalOnIntegers) {
  ExpectRejected(R"(module m
ENTRY %main (x: s32[4]) -> s32[4] {
  %x = s32[4] parameter(0)
  ROOT %e = s32[4] exponential(%x)
})",
                 "floating-point");
}

TEST(Verifier, RejectsBadBroadcast) {
  ExpectRejected(R"(module m
ENTRY %main (x: f32[3]) -> f32[4,5] {
  %x = f32[3] parameter(0)
  ROOT %b = f32[4,5] broadcast(%x), dimensions={1}
})",
                 "does not fit");
}

TEST(Verifier, RejectsOutOfBoundsSlice) {
  ExpectRejected(R"(module m
ENTRY %main (x: f32[4]) -> f32[3] {
  %x = f32[4] parameter(0)
  ROOT %s = f32[3] slice(%x), slice={[2:5:1]}
})",
                 "out of bounds");
}

TEST(Verifier, RejectsCombinerOfWrongType) {
  ExpectRejected(R"(module m
%add_s32 (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %s = s32[] add(%a, %b)
}
ENTRY %main (x: f32[4]) -> f32[] {
  %x = f32[4] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add_s32
})",
                 "parameter 0 of %add_s32");
}

TEST(Verifier, RejectsWrongOperandCount) {
  ExpectRejected(R"(module m
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %a = f32[4] add(%x)
})",
                 "takes 2 operands");
}

TEST(Verifier, RejectsFusionWhoseParametersDoNotMatch) {
  ExpectRejected(R"(module m
%fused (p: f32[3]) -> f32[3] {
  %p = f32[3] parameter(0)
  ROOT %n = f32[3] negate(%p)
}
ENTRY %main (x: f32[4]) -> f32[3] {
  %x = f32[4] parameter(0)
  ROOT %f = f32[3] fusion(%x), kind=kLoop, calls=%fused
})",
                 "parameter 0 of %fused");
}

TEST(Verifier, RejectsGraphEditsThatBreakUsers) {
  std::unique_ptr<Module> m = Parse(R"(module m
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %n = f32[4] negate(%x)
  ROOT %a = f32[4] abs(%n)
})");
  VerifyModule(*m);
  // A cycle: %n now uses %a, which uses %n.
  Instruction* n = m->entry()->root()->operand(0);
  n->ReplaceOperandWith(0, m->entry()->root());
  EXPECT_THROW(VerifyModule(*m), Error);
}

TEST(Builder, InfersShapesAndRejectsBadOps) {
  Module m("built");
  Computation* c = m.AddComputation("main");
  m.set_entry(c);
  Builder b(c);
  Instruction* x = b.Parameter(0, Shape(DType::kF32, {2, 3}));
  Instruction* t = b.Add(Opcode::kTranspose, {x}, [] {
    InstructionAttrs a;
    a.dimensions = {1, 0};
    return a;
  }());
  EXPECT_EQ(t->shape().ToString(), "f32[3,2]");
  EXPECT_THROW(b.Binary(Opcode::kAdd, x, t), Error);
  Computation* add = MakeScalarCombiner(m, Opcode::kAdd, DType::kF32);
  Instruction* r = b.Reduce(x, b.ScalarConstant(DType::kF32, 0), {1}, add);
  EXPECT_EQ(r->shape().ToString(), "f32[2]");
  c->set_root(b.Tuple({r}));
  VerifyModule(m);
}

TEST(DotPrinter, DrawsFusionsAsClusters) {
  std::unique_ptr<Module> m = Parse(R"(module m
%fused (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %n = f32[4] negate(%p)
  ROOT %e = f32[4] exponential(%n)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %f = f32[4] fusion(%x), kind=kLoop, calls=%fused
})");
  std::string dot = ModuleToDot(*m);
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("subgraph cluster_"), std::string::npos);
  EXPECT_NE(dot.find("exponential"), std::string::npos);
}

}  // namespace
}  // namespace fj
