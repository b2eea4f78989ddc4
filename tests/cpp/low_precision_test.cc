// The 16-bit floats: the scalar conversions (support/float16.h) against the compiler's own
// _Float16, and the low-precision pass (IR text in, IR text out).
#include <gtest/gtest.h>

#include <random>

#include "passes/low_precision.h"
#include "support/float16.h"
#include "test_util.h"

namespace fj {
namespace {

using testing::Normalize;
using testing::RunPass;

uint16_t HalfBits(_Float16 h) {
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}

TEST(Float16, EveryHalfWidensExactly) {
  for (uint32_t u = 0; u < 0x10000; ++u) {
    _Float16 h;
    uint16_t bits = static_cast<uint16_t>(u);
    std::memcpy(&h, &bits, sizeof h);
    float want = static_cast<float>(h);
    float got = F16ToF32(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << u;
    } else {
      EXPECT_EQ(F32Bits(got), F32Bits(want)) << u;
    }
  }
}

TEST(Float16, FloatsRoundToNearestEven) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t x = rng();
    if (i % 2) x = (x & 0x80000000u) | (0x33000000u + x % 0x14800000u);  // f16's range
    float f = F32FromBits(x);
    if (std::isnan(f)) {
      EXPECT_EQ(F32ToF16(f) & 0x7e00u, 0x7e00u);  // a quiet NaN
      continue;
    }
    ASSERT_EQ(F32ToF16(f), HalfBits(static_cast<_Float16>(f))) << std::hex << x;
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBF16(F32FromBits(0x3f808000u)), 0x3f80);  // tie, to even
  EXPECT_EQ(F32ToBF16(F32FromBits(0x3f818000u)), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(F32ToBF16(F32FromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(F32ToBF16(F32FromBits(0x7f7fffffu)), 0x7f80);  // overflows to inf
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(F32FromBits(0x7f800001u)))));  // stays NaN
  EXPECT_EQ(BF16ToF32(0xc040), -3.0f);
}

TEST(LowPrecision, ComputesInF32AndRoundsEveryResult) {
  bool changed = false;
  std::string out = RunPass<LowPrecisionPass>(R"(
module m

%add_f16 (a: f16[], b: f16[]) -> f16[] {
  %a = f16[] parameter(0)
  %b = f16[] parameter(1)
  ROOT %s = f16[] add(%a, %b)
}

ENTRY %main (x: f16[4], y: bf16[4]) -> (f16[4], f16[], pred[4], bf16[4]) {
  %x = f16[4] parameter(0)
  %y = bf16[4] parameter(1)
  %e = f16[4] exponential(%x)
  %zero = f16[] constant(0)
  %sum = f16[] reduce(%e, %zero), dimensions={0}, to_apply=%add_f16
  %cvt = f16[4] convert(%y)
  %lt = pred[4] compare(%e, %cvt), direction=LT
  %rev = bf16[4] reverse(%y), dimensions={0}
  ROOT %t = (f16[4], f16[], pred[4], bf16[4]) tuple(%e, %sum, %lt, %rev)
}
)", &changed);
  EXPECT_TRUE(changed);
  std::string text = Normalize(out);
  // exp and the reduction compute in f32; their results are rounded to f16.
  EXPECT_NE(text.find("f32[4] exponential("), std::string::npos) << out;
  EXPECT_NE(text.find("f16[4] convert(%e"), std::string::npos) << out;
  EXPECT_NE(text.find("f32[] reduce("), std::string::npos) << out;
  EXPECT_NE(text.find("f32[] add("), std::string::npos) << out;  // an f32 combiner
  EXPECT_NE(text.find("pred[4] compare("), std::string::npos) << out;
  // What only moves or converts bits stays 16-bit.
  EXPECT_NE(text.find("bf16[4] reverse(%y)"), std::string::npos) << out;
  EXPECT_NE(text.find("f16[4] convert(%y)"), std::string::npos) << out;
  EXPECT_EQ(text.find("f16[4] exponential("), std::string::npos) << out;

  bool again = true;
  RunPass<LowPrecisionPass>(out, &again);
  EXPECT_FALSE(again);
}

}  // namespace
}  // namespace fj
