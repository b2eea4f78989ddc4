// Low-precision float normalization (XLA's FloatNormalization / BFloat16Normalization): every
// instruction that computes on f16 or bf16 is rewritten to compute in f32, its 16-bit
// operands converted up (exactly) and its result rounded back to 16 bits:
//   add(f16 a, f16 b)  ->  convert<f16>(add(convert<f32>(a), convert<f32>(b)))
// So each operation rounds once, as JAX on XLA's CPU and GPU backends does for elementwise
// work; a reduction accumulates in f32 and rounds once at the end (XLA upcasts reductions
// too), and a dot multiplies and accumulates in f32. What only moves, selects or converts
// bits (MovesBitsOnly) stays 16-bit, so kernels read and write half the bytes. After this
// pass nothing else in the compiler computes on 16-bit floats: the evaluator, the fusion
// rules and codegen only load, store, move and convert them.
#pragma once

#include "passes/pass.h"

namespace fj {

class LowPrecisionPass : public Pass {
 public:
  std::string_view name() const override { return "low-precision"; }
  bool Run(Module& module) override;
};

}  // namespace fj
