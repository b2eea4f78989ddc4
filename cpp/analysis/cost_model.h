// A cost model for kernels on the CPU target: bytes moved, work, and a launch cost,
// combined into an estimated time (the roofline max of memory and compute time). The
// fusionjit profile decides fusions with it; explain shows its figures.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "ir/module.h"
#include "support/target.h"

namespace fj {

// Work per element of an op, in units of one vector-lane arithmetic op (an add is 1).
double ElementCost(const Instruction& instr);

// A reduction over exactly the last dimension of an operand shaped like `kernel` (rank >= 2),
// so that its result holds the kernel's outer dimensions: a kernel that walks `kernel` row
// by row computes it once per row, before the row's elements, and every element of the row
// reads it from a register (a row fusion, beyond XLA: softmax, layer norm).
bool IsPerRowReduction(const Instruction* reduce, const Shape& kernel);

// A value such a kernel keeps for the row it walks, computed once per element into a row
// buffer and read back by its other users: the operand of a per-row reduction that
// something else reads too, with a transcendental op in it short of the kernel's inputs and
// per-row reductions, and rows of at most kMaxKeptRowBytes (softmax's exp(x - max)).
constexpr int64_t kMaxKeptRowBytes = 64 * 1024;
bool IsKeptRowValue(const Instruction* instr, const Shape& kernel);
// The part of that which does not depend on how `instr` is computed: where a producer with
// a transcendental op fused in place of `instr` would be kept.
bool IsRowValueSlot(const Instruction* instr, const Shape& kernel);
// Whether `instr`, or any op of it when it is a fusion, is transcendental.
bool HasTranscendental(const Instruction* instr);
// The shape a fused computation's kernel walks: its root's, or a tuple root's first.
const Shape& KernelShape(const Computation& fused);

// How many times each instruction of a fused computation is evaluated when the kernel
// produces all of its outputs: the root once per element, and an operand once per
// evaluation of each user times the user's reads per evaluation (a reduction reads its
// reduced elements, a dot its contraction). Broadcasts and slices re-evaluate their
// operand per output element, since nothing is cached across elements.
// `keep(x, e)`: whether the kernel keeps x's values once computed (x evaluated e times
// otherwise); a kept value is evaluated once per element.
using KeepFn = std::function<bool(const Instruction* x, double evaluations)>;
std::unordered_map<const Instruction*, double> Evaluations(const Computation& fused, const KeepFn& keep = {});

// A whole-loop step (kWholeLoop: see ir/whole_loop.h) keeps, for each lane in each step, the
// rows of values it would otherwise compute again for every read: a row the lanes' values
// give each lane (a hidden layer's units) read by a matrix product, a reduction or an argmax.
// At most this many bytes per lane and value.
constexpr int64_t kMaxKeptLaneRowBytes = 1024;
KeepFn LaneRowKeeper(const InstructionAttrs& attrs, const Computation& step);
// Those values, producers first.
std::vector<const Instruction*> KeptLaneRows(const InstructionAttrs& attrs, const Computation& step);

// Evaluations of operand `i` of `consumer` (a fusion or a single op).
double OperandEvaluations(const Instruction* consumer, int i);

struct KernelCost {
  double bytes_read = 0;
  double bytes_written = 0;
  double flops = 0;
  double bytes() const { return bytes_read + bytes_written; }
};

// The cost of `instr` run as one kernel (a fusion, or a single op as its own kernel).
KernelCost EstimateKernel(const Instruction* instr);

struct CostModel {
  // The target's figures (Target::For): the CPU's by default. Only ratios matter.
  CostModel() : CostModel(Target()) {}
  explicit CostModel(const Target& target)
      : bytes_per_us(target.bytes_per_us), flops_per_us(target.flops_per_us), launch_us(target.launch_us) {}
  double bytes_per_us;  // sustained memory bandwidth
  double flops_per_us;  // vector lane-ops per microsecond
  double launch_us;     // a kernel launch from the program, its loop set-up
  double TimeUs(const KernelCost& c) const;
};

// A program after kernel formation: its kernels (fusions and custom calls of the entry)
// and their estimated time, one after another.
struct ProgramCost {
  int kernels = 0;
  double us = 0;
};
ProgramCost EstimateProgram(const Module& module, const CostModel& model);

}  // namespace fj
