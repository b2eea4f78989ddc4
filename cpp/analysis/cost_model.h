// A cost model for kernels on the CPU target: bytes moved, work, and a launch cost,
// combined into an estimated time (the roofline max of memory and compute time). The
// fusionjit profile decides fusions with it; explain shows its figures.
#pragma once

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/kernel_heroes.h"
#include "ir/module.h"
#include "support/target.h"

namespace fj {

// Loops whose trip count is not known are assumed to run this often.
constexpr double kUnknownTripCount = 10;

// Work per element of an op, in lane-ops (Target::flops_per_us): measured on the CPU
// (benchmarks/cost_model.py), where an exp costs 12 and an add, a compare or a select 0.5.
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

// How many times each instruction of a fused computation is evaluated when the kernel
// produces all of its outputs: the root once per element, and an operand once per
// evaluation of each user times the user's reads per evaluation (a reduction reads its
// reduced elements, a dot its contraction). Broadcasts and slices re-evaluate their
// operand per output element, since nothing is cached across elements.
// `keep(x, e)`: whether the kernel keeps x's values once computed (x evaluated e times
// otherwise); a kept value is evaluated once per element.
using KeepFn = std::function<bool(const Instruction* x, double evaluations)>;
std::unordered_map<const Instruction*, double> Evaluations(const Computation& fused, const KeepFn& keep = {});

// A whole-loop step (kWholeLoop: see ir/whole_loop.h) keeps the values it would otherwise
// compute again for every read:
// - for each lane, the rows of values the lanes' values give each lane (a hidden layer's
//   units) read by a matrix product, a reduction or an argmax; at most this many bytes per
//   lane and value;
constexpr int64_t kMaxKeptLaneRowBytes = 1024;
// - the values the lanes share (computed from the uniform carries, the invariants and the
//   counter alone) read at more positions than they have elements: a recurrent layer's
//   gradient computes its hidden units' derivatives once a step, not again for each of the
//   weights' lanes that reads them and for each element of the next state's product. A
//   group of lanes computes them element by element into a stack buffer of at most this
//   many bytes per value.
constexpr int64_t kMaxKeptUniformBytes = 4096;
KeepFn StepKeeper(const InstructionAttrs& attrs, const Computation& step);
// The values of a whole-loop step its lanes share: those computed from the uniform carries,
// the invariants and the counter alone, but for values of the lanes' shape (read by each
// lane at its own position).
std::unordered_set<const Instruction*> SharedStepValues(const InstructionAttrs& attrs, const Computation& step);
// The groups of lanes a whole-loop kernel (`kernel`; others: 0) steps through its loop on
// `vector_lanes`-lane vectors (codegen's PlanWholeLoopVectors, roughly): groups of 64 lanes,
// then vectors of twice the width, then of the width (the last one part full), then, with
// fewer lanes than a vector, lanes one by one. On the GPU (1 lane), every lane.
int64_t WholeLoopLaneGroups(const Instruction* kernel, int vector_lanes);
// Those values, producers first.
struct KeptStepValues {
  std::vector<const Instruction*> lane_rows;
  std::vector<const Instruction*> uniform;
};
KeptStepValues KeptValues(const InstructionAttrs& attrs, const Computation& step);

// Whether a scatter's windows are whole rows of its operand: one index per window, into
// dimension 0, and the window the operand's other dimensions whole, from the updates' last
// dimensions in order (a segment sum, an embedding's gradient, x.at[rows].add(u)).
bool ScattersRows(const Instruction* scatter);

// Evaluations of operand `i` of `consumer` (a fusion or a single op).
double OperandEvaluations(const Instruction* consumer, int i);

// The row space (RowSpace) of a kernel: a fusion's, or a single op's shape of rank >= 2.
const Shape* RowSpaceOf(const Instruction* kernel);

// The lane-ops one element of `producer` costs computed inside a consumer kernel that walks
// the rows of `rows` (RowSpaceOf; null: by element): its own kernel's share per element when
// the consumer walks the same rows, more when its per-row reductions and the values constant
// along its rows, computed once per row in its own kernel, would be computed again for
// every element (a layer norm's row statistics under a full reduction: seed 324735).
double FlopsPerElementIn(const Instruction* producer, const Shape* rows);

struct KernelCost {
  double bytes_read = 0;
  double bytes_written = 0;
  double flops = 0;
  // Element steps: the most evaluations any op of the kernel makes (in all steps of a whole
  // loop).
  double work = 0;
  // Vector steps that row reductions spend per output beyond their elements: combining a
  // vector of partial results into one (a max or a min, with its NaN tests, about three
  // times a sum's).
  double row_steps = 0;
  // A whole-loop kernel's lane-ops on values its lanes share (SharedStepValues), in all
  // steps: every group of lanes it steps computes them, one element at a time.
  double shared_flops = 0;
  // The kernel these are the figures of (a fusion or a single op): the target walks its
  // short rows (ShortRowWalk) as its vectors allow, and TimeUs prices that walk.
  const Instruction* kernel = nullptr;
  // Time spent outside generated code, on the calling thread: a host callback's call into
  // the front end (about 3 us with its arguments' copies).
  double host_us = 0;
  double bytes() const { return bytes_read + bytes_written; }
};

// The cost of `instr` run as one kernel (a fusion, or a single op as its own kernel).
KernelCost EstimateKernel(const Instruction* instr);

// While one is alive on a thread, EstimateKernel of a fusion and the evaluations of its
// operands (OperandEvaluations) are computed once per kernel and then looked up: the fusion
// passes price one kernel against each of its candidate producers, and each estimate walks
// the whole kernel (kernels of thousands of ops in unrolled loops made compile time cubic).
// Valid while kernels are only built anew (a pass frees none until it ends); what changes a
// kernel in place says so (Forget, or Grew).
class KernelCostCache {
 public:
  KernelCostCache();
  ~KernelCostCache();
  KernelCostCache(const KernelCostCache&) = delete;
  KernelCostCache& operator=(const KernelCostCache&) = delete;
  static void Forget(const Instruction* kernel);
  // For a producer fused into `kernel` in place (FuseIntoFusion): `changed` are the ops it
  // added and the parameters that gained users, users before operands; `removed` the
  // parameters it replaced. The other ops keep their evaluations (their users did not
  // change), so only the changed ones are evaluated again; a kernel whose rows or shape
  // changed, or a row kernel that gained a transcendental op or a reduction, is forgotten.
  // Growing a kernel op by op was quadratic in its size (16-step unrolled key-split scan:
  // 3 s in instruction fusion).
  static void Grew(const Instruction* kernel, const std::vector<const Instruction*>& changed,
                   const std::vector<const Instruction*>& removed);

 private:
  bool installed_ = false;
};

// Whether a kernel runs on the thread pool (it needs more than one unit as well): from
// Target::parallel_min_work element steps, or parallel_min_lane_ops lane-ops. Codegen
// decides with it and the model prices with it.
bool RunsInParallel(const KernelCost& c, const Target& target);

struct CostModel {
  // The target's figures (Target::For): the CPU's by default. Only ratios matter.
  CostModel() : CostModel(Target()) {}
  explicit CostModel(const Target& target) : target(target) {}
  Target target;  // its cost figures
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
