// Donated parameters (Module::donated_parameters): which outputs take their buffers over
// (BufferAssignment), and the run that hands a donated buffer to its output or, when the
// caller keeps it, copies the parameter into the output first.
#include <gtest/gtest.h>

#include <cstring>

#include "analysis/buffer_assignment.h"
#include "analysis/cost_model.h"
#include "compiler/compiler.h"
#include "ir/parser.h"
#include "fusion/kernel_wrapper.h"
#include "runtime/executable.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Parse;

// A replay buffer's insert: rows written at a dynamic row, plus the old buffer's sum.
constexpr const char* kInsert = R"(
module m, donated={0}
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (buf: f32[64,4], rows: f32[2,4], i: s32[]) -> (f32[64,4], f32[]) {
  %buf = f32[64,4] parameter(0)
  %rows = f32[2,4] parameter(1)
  %i = s32[] parameter(2)
  %zero = s32[] constant(0)
  %new = f32[64,4] dynamic-update-slice(%buf, %rows, %i, %zero)
  %z = f32[] constant(0)
  %sum = f32[] reduce(%buf, %z), dimensions={0,1}, to_apply=%add
  ROOT %t = (f32[64,4], f32[]) tuple(%new, %sum)
}
)";

TEST(Donation, TheDonatedListRoundTripsThroughTheText) {
  std::unique_ptr<Module> m = Parse(kInsert);
  EXPECT_EQ(m->donated_parameters(), std::vector<int64_t>{0});
  EXPECT_TRUE(m->IsDonated(0));
  EXPECT_FALSE(m->IsDonated(1));
  EXPECT_NE(m->ToString().find("module m, donated={0}\n"), std::string::npos);
  EXPECT_EQ(ParseModule(m->ToString())->ToString(), m->ToString());
  EXPECT_EQ(m->Clone()->donated_parameters(), std::vector<int64_t>{0});
}

TEST(Donation, AnUpdateOfTheDonatedBufferWritesItInPlaceAfterItsOtherReaders) {
  std::unique_ptr<Module> m = Parse(kInsert);
  KernelWrapperPass().Run(*m);
  BufferAssignment buffers(*m);
  ASSERT_EQ(buffers.output_aliases().size(), 2u);
  EXPECT_EQ(buffers.output_aliases()[0].parameter, 0) << buffers.ToString();
  EXPECT_TRUE(buffers.output_aliases()[0].updated);
  EXPECT_EQ(buffers.output_aliases()[1].parameter, -1);
  // The sum reads the old buffer: it runs before the update (though returned after it).
  const std::vector<const Instruction*>& order = buffers.schedule();
  auto at = [&](Opcode op) {
    for (size_t p = 0; p < order.size(); ++p) {
      if (order[p]->opcode() == Opcode::kFusion && order[p]->fused_computation()->root()->opcode() == op) return p;
    }
    return order.size();
  };
  EXPECT_LT(at(Opcode::kReduce), at(Opcode::kDynamicUpdateSlice));
  const Instruction* update = m->entry()->root()->operand(0);
  EXPECT_TRUE(buffers.WritesInPlace(update));
}

TEST(Donation, WithoutTheDonationTheUpdateCopiesTheBuffer) {
  std::unique_ptr<Module> m = Parse(kInsert);
  m->set_donated_parameters({});
  KernelWrapperPass().Run(*m);
  BufferAssignment buffers(*m);
  EXPECT_EQ(buffers.output_aliases()[0].parameter, -1);
  EXPECT_FALSE(buffers.WritesInPlace(m->entry()->root()->operand(0)));
}

TEST(Donation, TheCostModelPricesAnUpdateOfAKeptParameterAsTheCopyItIs) {
  // Kept by the caller, the buffer is copied whole into the output (64 x 4 floats read and
  // written); donated, the kernel writes the two rows it updates.
  for (bool donated : {false, true}) {
    std::unique_ptr<Module> m = Parse(kInsert);
    if (!donated) m->set_donated_parameters({});
    KernelWrapperPass().Run(*m);
    const Instruction* update = m->entry()->root()->operand(0);
    ASSERT_EQ(update->opcode(), Opcode::kFusion);
    KernelCost cost = EstimateKernel(update);
    EXPECT_EQ(cost.bytes_written, donated ? 2 * 4 * 4 : 64 * 4 * 4) << (donated ? "donated" : "kept");
    EXPECT_GE(cost.bytes_read, donated ? 0 : 64 * 4 * 4);
  }
}

// Runs the compiled insert on `buf` (donated or not); returns the outputs.
std::vector<std::shared_ptr<Buffer>> RunInsert(const Executable& exe, const std::shared_ptr<Buffer>& buf,
                                               bool donate) {
  float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t i = 3;
  std::vector<Argument> args(3);
  args[0].buffer = buf.get();
  if (donate) args[0].donated = buf;
  args[1].host = rows;
  args[2].host = &i;
  return exe.Run(args);
}

TEST(Donation, TheRunHandsTheDonatedBufferToItsOutputElseCopiesItFirst) {
  std::unique_ptr<Compilation> c = Compile(*Parse(kInsert), CompileOptions{});
  const Executable& exe = *c->executable;
  ASSERT_EQ(exe.output_aliases().size(), 2u);
  EXPECT_EQ(exe.output_aliases()[0].parameter, 0);
  auto filled = [] {
    std::shared_ptr<Buffer> b = Buffer::Allocate(64 * 4 * 4);
    auto* f = static_cast<float*>(b->data());
    for (int k = 0; k < 256; ++k) f[k] = static_cast<float>(k);
    return b;
  };
  for (bool donate : {true, false}) {
    std::shared_ptr<Buffer> buf = filled();
    std::vector<std::shared_ptr<Buffer>> outs = RunInsert(exe, buf, donate);
    EXPECT_EQ(outs[0] == buf, donate);
    const auto* out = static_cast<const float*>(outs[0]->data());
    for (int k = 0; k < 256; ++k) {
      float want = k >= 12 && k < 20 ? static_cast<float>(k - 11) : static_cast<float>(k);
      ASSERT_EQ(out[k], want) << "element " << k << (donate ? " (donated)" : " (kept)");
    }
    EXPECT_EQ(*static_cast<const float*>(outs[1]->data()), 255.0f * 256 / 2);  // the old sum
    // A buffer the caller keeps is left as it was.
    if (!donate) EXPECT_EQ(static_cast<const float*>(buf->data())[12], 12.0f);
  }
}

TEST(Donation, TheGpuTakesNoDonation) {
  CompileOptions o;
  o.backend = Backend::kGpuEmulated;
  std::unique_ptr<Compilation> c = Compile(*Parse(kInsert), o);
  for (const OutputAlias& a : c->executable->output_aliases()) EXPECT_EQ(a.parameter, -1);
  EXPECT_TRUE(c->optimized->donated_parameters().empty());
}

}  // namespace
}  // namespace fj
