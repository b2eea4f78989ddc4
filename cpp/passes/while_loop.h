// Loop passes (before fusion): trip counts, simplification and unrolling of while loops.
#pragma once

#include <functional>
#include <string>

#include "passes/pass.h"

namespace fj {

// Records the trip count of counted loops (lax.scan, fori_loop) on the while instruction
// (trip_count=), so that codegen runs them as counted loops without evaluating their
// condition, and later passes know how often a body runs.
class WhileTripCountPass : public Pass {
 public:
  std::string_view name() const override { return "while-trip-count"; }
  bool Run(Module& module) override;
};

// Simplifies loops: an element the body passes on unchanged is read from its initial value
// after the loop (tuple forwarding); elements nothing reads after the loop and that no
// other element, nor the condition, depends on are removed (dead carries); a loop that
// runs zero times is replaced by its initial state, one that runs once by its body.
class WhileLoopSimplifyPass : public Pass {
 public:
  std::string_view name() const override { return "while-simplify"; }
  bool Run(Module& module) override;
};

// Unrolls counted loops by the factor the user asked for (unroll=k on the while): each
// iteration runs k copies of the body, the trips that do not fill a whole iteration run
// after the loop, and a loop unrolled by its trip count (or more) disappears. With
// `choose` (the fusionjit profile), a loop without a factor from the user gets one from the
// cost model: small bodies, whose iterations cost mostly loop overhead, are unrolled.
class WhileLoopUnrollPass : public Pass {
 public:
  // Told, for every counted loop, the factor it gets (1: none) and why.
  using Note = std::function<void(const Instruction* loop, int64_t factor, const std::string& why)>;
  explicit WhileLoopUnrollPass(bool choose = false, Note note = nullptr) : choose_(choose), note_(std::move(note)) {}
  std::string_view name() const override { return "while-unroll"; }
  bool Run(Module& module) override;

  // Ops of a body unrolled by the cost model's choice, at most.
  static constexpr int64_t kMaxUnrolledOps = 1024;
  // Ops that end a kernel (reductions, dots, scatters, custom calls such as sorts, nested
  // control flow) in a body the cost model unrolls, at most.
  static constexpr int64_t kMaxUnrolledKernelEnds = 2;
  static int64_t KernelEndingOps(const Computation& body);
  // The factor the cost model picks for a body of `body_us` estimated microseconds per
  // iteration and `trip_count` iterations, at most `max_factor` (1: leave the loop as it is).
  static int64_t ChooseFactor(double body_us, int64_t trip_count, int64_t max_factor);

 private:
  bool choose_;
  Note note_;
};

}  // namespace fj
