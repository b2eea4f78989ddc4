// Costs of the runtime's custom calls (see custom_call_cost.h).
#include "analysis/custom_call_cost.h"

#include <algorithm>
#include <cmath>

namespace fj {
namespace {

constexpr double kHostCallbackUs = 3;

// top_k.<dtype> (runtime/top_k.cc) on x [rows, n], k outputs per row. Its scalar steps
// are priced as row_steps (one instruction each, as a vector step). Measured on rows of
// normal floats, one thread of an AVX-512 core: a vectorised pass over the row (0.085 ns an
// element: 2.5 lane-ops) and, for each of the about k ln(n / k) elements that enter the k
// kept so far, some 70 steps (its block of 32 scanned again, the insertion); for large k
// (8k >= n), a selection of all (22 steps an element) and a sort of k (11 per k log2 k).
void PriceTopK(const Instruction* call, KernelCost& c) {
  const Shape& x = call->operand(0)->shape();
  double rows = static_cast<double>(x.dim(0)), n = static_cast<double>(x.dim(1));
  double k = static_cast<double>(call->shape().dim(1));
  if (rows * k == 0) return;
  c.flops = rows * n * 2.5;
  if (k * 8 >= n) {
    c.row_steps = rows * ((k < n ? 22 * n : 0) + 11 * k * std::log2(std::max(k, 2.0)));
  } else {
    c.row_steps = rows * 70 * k * std::log(n / k);
  }
}

}  // namespace

void PriceCustomCall(const Instruction* call, KernelCost& c) {
  for (const Instruction* op : call->operands()) {
    if (op->shape().IsArray()) c.work = std::max(c.work, static_cast<double>(op->shape().NumElements()));
  }
  if (call->attrs().custom_call_target.rfind("top_k.", 0) == 0) PriceTopK(call, c);
  // A host callback (runtime/host_callback.h): a call into Python with copies of its
  // operands (a no-op debug.callback of a scalar in a fori_loop: 2.7 us a step).
  if (HasSideEffects(call)) c.host_us = kHostCallbackUs;
}

}  // namespace fj
