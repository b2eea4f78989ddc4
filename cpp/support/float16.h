// Conversions between f32 and the 16-bit floats (IEEE binary16 "f16" and bfloat16 "bf16"),
// by their bits, rounding to nearest even. These are the reference for constant folding and
// literals; codegen (codegen/elemental.cc, EmitToF32/EmitFromF32) emits the same steps as
// branch-free vector IR, so a folded constant and a computed value have the same bits.
// NaN stays NaN (quiet, its top payload bits kept); what overflows becomes infinity.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fj {

inline uint32_t F32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float F32FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The constants both implementations share.
namespace half_bits {
inline constexpr uint32_t kF32Inf = 0x7f800000u;
inline constexpr uint32_t kRebias = (127 - 15) << 23;   // f32 exponent bias minus f16's
inline constexpr uint32_t kF16MinNormal = 0x38800000u;  // 2^-14 as f32 bits
inline constexpr uint32_t kHalf = 0x3f000000u;          // 0.5f: ulp 2^-24, f16's subnormal step
}  // namespace half_bits

inline uint16_t F32ToF16(float f) {
  using namespace half_bits;
  uint32_t x = F32Bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t h;
  if (a > kF32Inf) {
    h = 0x7e00u | ((a >> 13) & 0x3ffu);
  } else if (a >= kF16MinNormal) {
    // Normal in f16 (or too large): rebias, round the 13 dropped bits to nearest even.
    uint32_t r = (a - kRebias + 0xfffu + ((a >> 13) & 1u)) >> 13;
    h = r < 0x7c00u ? r : 0x7c00u;
  } else {
    // Subnormal in f16: adding 0.5 makes the FPU round to a multiple of 2^-24.
    h = F32Bits(F32FromBits(a) + 0.5f) - kHalf;
  }
  return static_cast<uint16_t>(sign | h);
}

inline float F16ToF32(uint16_t h) {
  using namespace half_bits;
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {
    bits = kF32Inf | ((em & 0x3ffu) << 13);  // inf, NaN
  } else if (em >= 0x0400u) {
    bits = (em << 13) + kRebias;  // normal
  } else {
    bits = F32Bits(F32FromBits(kHalf + em) - 0.5f);  // subnormal: em * 2^-24, exactly
  }
  return F32FromBits(sign | bits);
}

inline uint16_t F32ToBF16(float f) {
  uint32_t x = F32Bits(f);
  if ((x & 0x7fffffffu) > half_bits::kF32Inf) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float BF16ToF32(uint16_t b) { return F32FromBits(static_cast<uint32_t>(b) << 16); }

// f64 goes through f32, rounding twice, as XLA's CPU and GPU backends convert (NumPy rounds
// f64 -> f16 once: the two differ on values within 2^-29 relative of a 16-bit halfway point).
inline uint16_t F64ToF16(double d) { return F32ToF16(static_cast<float>(d)); }
inline uint16_t F64ToBF16(double d) { return F32ToBF16(static_cast<float>(d)); }

}  // namespace fj
