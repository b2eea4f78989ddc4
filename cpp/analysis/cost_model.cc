// The CPU cost model (see cost_model.h).
#include "analysis/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "analysis/buffer_assignment.h"
#include "analysis/custom_call_cost.h"
#include "ir/whole_loop.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj {
namespace {

double Elements(const Shape& s) {
  if (s.IsTuple()) {
    double n = 0;
    for (const Shape& e : s.tuple_shapes()) n += Elements(e);
    return n;
  }
  return static_cast<double>(s.NumElements());
}

// How many elements of operand `i` one evaluation of `user` reads.
// The lanes of the CPU's vector groups the estimates assume (AVX2/AVX-512: 8-16).
constexpr double kCpuLanes = 8;

double ReadsPerEvaluation(const Instruction* user, int i) {
  switch (user->opcode()) {
    case Opcode::kReduce: {
      if (i != 0) return 1.0;
      double out = std::max(1.0, Elements(user->shape()));
      return Elements(user->operand(0)->shape()) / out;
    }
    case Opcode::kArgMax:
    case Opcode::kArgMin:
      return static_cast<double>(user->operand(0)->shape().dim(user->dimensions()[0]));
    case Opcode::kDot: {
      double k = 1;
      for (int64_t d : user->attrs().dot.lhs_contracting) k *= user->operand(0)->shape().dim(d);
      return k;
    }
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
      // The start indices are scalars, the same for every element: computed once per vector
      // group at most (they are loop-invariant), not per element (the CartPole pool's
      // `t % rows` was priced 2048 times a step).
      return i == 0 || (user->opcode() == Opcode::kDynamicUpdateSlice && i == 1) ? 1.0 : 1.0 / kCpuLanes;
    case Opcode::kBroadcast:
      // A scalar (or tiny) operand is the same for every lane of a vector group: computed
      // once per group of kCpuLanes elements, not per element.
      return user->operand(0)->shape().NumElements() <= 1 ? 1.0 / kCpuLanes : 1.0;
    default:
      return 1.0;
  }
}

// Ops whose work is per element read rather than per element produced.
bool IsReadingMany(const Instruction* i) {
  Opcode op = i->opcode();
  return op == Opcode::kReduce || op == Opcode::kArgMax || op == Opcode::kArgMin || op == Opcode::kDot;
}

// A reduction over exactly the last dimension of a rank >= 2 operand.
bool IsRowReductionOp(const Instruction* i) {
  return i->opcode() == Opcode::kReduce && i->operand(0)->shape().rank() >= 2 && i->dimensions().size() == 1 &&
         i->dimensions()[0] == i->operand(0)->shape().rank() - 1;
}

// Measured (benchmarks/cost_model.py): a row sum's output costs about 2 vector steps beyond
// its elements (combining a vector of partial sums), a row max or min about 6 (its NaN
// tests). Alike in a row-fused kernel and in a reduction kernel of its own.
double StepsPerRow(const Instruction* reduce) {
  Opcode combiner = reduce->to_apply()->root()->opcode();
  return combiner == Opcode::kMaximum || combiner == Opcode::kMinimum ? 6.0 : 2.0;
}

// Those steps for every output of a row reduction. Rows shorter than ShortRowLanes (16 on
// the CPU) are combined in order, one element at a time, in lanes or not: no
// vector of partial results to combine (a policy's entropy over 6 actions was priced at
// 48 lane-ops a row for its max, and its row fusion refused: 1.5x slower).
double RowStepsOf(const Instruction* i) {
  if (!IsRowReductionOp(i) || i->operand(0)->shape().dims().back() < ShortRowLanes(static_cast<int>(kCpuLanes))) {
    return 0;
  }
  return Elements(i->shape()) * StepsPerRow(i);
}

}  // namespace

double ElementCost(const Instruction& instr) {
  bool f64 = instr.shape().IsArray() && instr.dtype() == DType::kF64;
  double wide = f64 ? 2.0 : 1.0;
  switch (instr.opcode()) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kTuple:
    case Opcode::kGetTupleElement:
    case Opcode::kBroadcast:
    case Opcode::kReshape:
    case Opcode::kTranspose:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kCopy:
    case Opcode::kBitcastConvert:
      return 0.0;
    case Opcode::kConcatenate:
    case Opcode::kPad:
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
    case Opcode::kGather:
    case Opcode::kIota:
      return 0.5;
    case Opcode::kDivide:
      return 4.0 * wide;
    case Opcode::kRemainder:
      return 32.0 * wide;  // an element at a time (fmod; integer division): 60-125 measured
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
      return 4.0 * wide;
    case Opcode::kExp:
      return 12.0 * wide;
    case Opcode::kLog:
      return 20.0 * wide;
    case Opcode::kExpm1:
    case Opcode::kLog1p:
      return 16.0 * wide;
    case Opcode::kSin:
    case Opcode::kCos:
      return 16.0 * wide;
    case Opcode::kTan:
    case Opcode::kTanh:
      return 24.0 * wide;
    case Opcode::kAtan2:
      return 30.0 * wide;
    case Opcode::kPower:
      return 40.0 * wide;
    case Opcode::kReduce:
    case Opcode::kArgMax:
    case Opcode::kArgMin:
      return 1.0 * wide;  // per element read (see ReadsPerEvaluation)
    case Opcode::kDot:
      // Per element read: one fused multiply-add, in tiles or whole-loop vectors that keep
      // several chains going (256 x 512 x 512, 1024^3 and a dense tanh layer ran at 0.77x
      // the estimate at 1.0).
      return 0.75 * wide;
    default:
      // An add, a compare, a select, a shift: two or more issue per cycle where the
      // transcendental functions' polynomials above are latency-bound chains.
      return 0.5 * wide;
  }
}

bool IsPerRowReduction(const Instruction* reduce, const Shape& kernel) {
  if (reduce->opcode() != Opcode::kReduce || !kernel.IsArray() || kernel.rank() < 2) return false;
  const Shape& in = reduce->operand(0)->shape();
  return in.SameDims(kernel) && reduce->dimensions().size() == 1 &&
         reduce->dimensions()[0] == kernel.rank() - 1;
}

bool HasTranscendental(const Instruction* instr) {
  if (instr->opcode() != Opcode::kFusion) return IsTranscendental(instr->opcode());
  for (const Instruction* i : instr->fused_computation()->MakePostOrder()) {
    if (HasTranscendental(i)) return true;
  }
  return false;
}

bool IsRowValueSlot(const Instruction* instr, const Shape& kernel) {
  if (!kernel.IsArray() || kernel.rank() < 2 || !instr->shape().IsArray() || instr->users().size() < 2 ||
      !instr->shape().SameDims(kernel) ||
      kernel.dims().back() * DTypeBytes(instr->dtype()) > kMaxKeptRowBytes) {
    return false;
  }
  for (const Instruction* u : instr->users()) {
    if (IsPerRowReduction(u, kernel) && u->operand(0) == instr) return true;
  }
  return false;
}

bool IsKeptRowValue(const Instruction* instr, const Shape& kernel) {
  if (!IsRowValueSlot(instr, kernel)) return false;
  // Costly to recompute: a transcendental op before the kernel's inputs and the row's
  // reductions (those are computed once per row anyway).
  std::vector<const Instruction*> work = {instr};
  std::unordered_set<const Instruction*> seen;
  while (!work.empty()) {
    const Instruction* i = work.back();
    work.pop_back();
    if (!seen.insert(i).second || IsPerRowReduction(i, kernel)) continue;
    if (IsTranscendental(i->opcode())) return true;
    for (const Instruction* op : i->operands()) work.push_back(op);
  }
  return false;
}

namespace {

// Whether broadcast `b` gives every element of a row of `rows` (a row kernel's RowSpace) one
// value that is computed without a loop of its own but the kernel's per-row reductions
// (those are in registers for the row): the row's inner loop leaves it unchanged, and it is
// computed once per row. Not a value with another reduction or a product in it: codegen
// runs that loop again wherever the value is read (large-tier fuzz seed 324418: hours).
bool IsRowInvariantBroadcast(const Instruction* b, const Shape& rows) {
  if (b->opcode() != Opcode::kBroadcast || !b->shape().IsArray() || !b->shape().SameDims(rows) ||
      rows.dims().back() <= 1) {
    return false;
  }
  const Shape& in = b->operand(0)->shape();
  const std::vector<int64_t>& dims = b->dimensions();
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == rows.rank() - 1 && in.dim(static_cast<int>(d)) > 1) return false;
  }
  std::vector<const Instruction*> work = {b->operand(0)};
  std::unordered_set<const Instruction*> seen;
  while (!work.empty()) {
    const Instruction* i = work.back();
    work.pop_back();
    if (!seen.insert(i).second || IsPerRowReduction(i, rows)) continue;
    if (IsReadingMany(i)) return false;
    for (const Instruction* op : i->operands()) work.push_back(op);
  }
  return true;
}

// What the evaluations of a fused computation's ops depend on besides their users: a kernel
// whose elements are those of `kernel` and that walks the rows of `rows` (null: element by
// element).
struct EvaluationSpace {
  const Instruction* root;
  const Shape* rows;
  const Shape& kernel;
  const KeepFn& keep;
  const Instruction* in_place;  // InPlaceUpdate
};

// The dynamic-update-slice root of a kernel that updates its operand's buffer in place
// (codegen's update plan walks the update alone: the rest of the buffer is neither read
// nor written), or null. (Priced as a copy of the whole buffer, each stacked output of a
// scan's step cost 1 MiB of traffic a step in the RNN training step, its loop 45x its
// measured time.)
const Instruction* InPlaceUpdate(const Computation& fused) {
  const Instruction* root = fused.root();
  return root->opcode() == Opcode::kDynamicUpdateSlice && InPlaceUpdateParameter(fused) >= 0 ? root : nullptr;
}

// Whether a kernel with an InPlaceUpdate cannot update in place after all: its operand is
// a parameter of the program that the caller keeps (not donated), so the kernel writes the
// whole output, the operand's elements copied. (Priced in place, a replay buffer's insert
// was estimated at 0.9 us; it took 1100 us.)
bool CopiesProgramParameter(const Instruction* kernel) {
  int slot = InPlaceUpdateOperand(kernel);
  if (slot < 0) return false;
  const Instruction* op = kernel->operand(slot);
  while (op->opcode() == Opcode::kReshape) op = op->operand(0);
  const Computation* c = op->parent();
  const Module* m = c->parent();
  return op->opcode() == Opcode::kParameter && m && c == m->entry() && !m->IsDonated(op->parameter_number());
}

// evals[x], or 0 where x has none.
double EvaluationsAt(const std::unordered_map<const Instruction*, double>& evals, const Instruction* x) {
  auto it = evals.find(x);
  return it == evals.end() ? 0.0 : it->second;
}

// How often the kernel evaluates `x`, from its users' evaluations in `evals`.
double EvaluationsOf(const Instruction* x, const EvaluationSpace& space,
                     const std::unordered_map<const Instruction*, double>& evals) {
  const Shape* rows = space.rows;
  const Shape& kernel = space.kernel;
  const bool keeps_rows = rows && rows->SameDims(kernel);  // a row plan's row buffers
  auto evals_of = [&](const Instruction* u) { return EvaluationsAt(evals, u); };
  double e = 0;
  if (x == space.root) {
    e = x->opcode() == Opcode::kTuple ? 0 : Elements(x->shape());
    if (space.in_place == x) e = Elements(x->operand(1)->shape());
  }
  // Users that read x at their own index (elementwise ops of its shape, the root tuple)
  // share one evaluation per index (the emitter caches values by index): the most any of
  // them needs. Users that read it elsewhere (broadcasts, slices, reductions) add theirs.
  double same_index = 0;
  for (const Instruction* u : x->users()) {
    double per = 0;
    // A reduction of everything over the kernel's own index space (a whole loop's lanes,
    // a reduction with side outputs) evaluates x where the kernel's outputs do.
    bool full_reduction_of_kernel_space =
        u->opcode() == Opcode::kReduce && x->shape().IsArray() && x->shape().SameDims(kernel) &&
        static_cast<int>(u->dimensions().size()) == x->shape().rank() && x->shape().rank() > 0;
    // A reshape (or a bitcast, a copy) of as many elements reads each of x's elements at
    // an index that the other readers of that element compute alike: they share it (an
    // unrolled scan's state goes through one every step; counted apart, its ops doubled
    // with each step).
    bool relabels = (u->opcode() == Opcode::kReshape || u->opcode() == Opcode::kBitcastConvert ||
                     u->opcode() == Opcode::kCopy) &&
                    u->shape().IsArray() && x->shape().IsArray() && Elements(u->shape()) == Elements(x->shape());
    bool at_own_index = u->opcode() == Opcode::kTuple || full_reduction_of_kernel_space || relabels ||
                        (IsElementwise(u->opcode()) && u->shape().IsArray() && x->shape().IsArray() &&
                         u->shape().SameDims(x->shape()));
    for (int i = 0; i < u->operand_count(); ++i) {
      if (u->operand(i) != x) continue;
      if (u->opcode() == Opcode::kTuple) {
        per = std::max(per, Elements(x->shape()));
      } else if (u->opcode() == Opcode::kDynamicUpdateSlice && i < 2) {
        // The update is read once per element of it; the operand where the update is not
        // (nowhere, in place).
        double update = Elements(u->operand(1)->shape());
        per += i == 1 ? update : u == space.in_place ? 0 : std::max(0.0, evals_of(u) - update);
      } else if (at_own_index) {
        // x * x reads x once: both operands are the value at the same index. (Counted
        // twice, cos(theta)**2 doubled the state's ops with every step of an unrolled
        // CartPole scan: 2^10 times the work.)
        per = std::max(per, evals_of(u) * ReadsPerEvaluation(u, i));
      } else if (rows && IsRowInvariantBroadcast(u, *rows)) {
        per += evals_of(u) / static_cast<double>(rows->dims().back());
      } else {
        per += evals_of(u) * ReadsPerEvaluation(u, i);
      }
    }
    if (at_own_index) {
      same_index = std::max(same_index, per);
    } else {
      e += per;
    }
  }
  e += same_index;
  if (rows && IsPerRowReduction(x, *rows)) e = std::min(e, Elements(x->shape()));  // once per row
  if (keeps_rows && IsKeptRowValue(x, *rows)) e = std::min(e, Elements(x->shape()));  // once per element
  if (space.keep && space.keep(x, e)) e = std::min(e, Elements(x->shape()));
  return e;
}

std::unordered_map<const Instruction*, double> EvaluationsOver(const Computation& fused, const KeepFn& keep,
                                                               const Shape* rows, const Shape& kernel) {
  std::unordered_map<const Instruction*, double> evals;
  std::vector<Instruction*> order = fused.MakePostOrder();
  EvaluationSpace space{fused.root(), rows, kernel, keep, InPlaceUpdate(fused)};
  for (auto it = order.rbegin(); it != order.rend(); ++it) evals[*it] = EvaluationsOf(*it, space, evals);
  return evals;
}

}  // namespace

std::unordered_map<const Instruction*, double> Evaluations(const Computation& fused, const KeepFn& keep) {
  return EvaluationsOver(fused, keep, RowSpace(fused), KernelShape(fused));
}

namespace {

// The lanes of a whole-loop step (its kernel's elements), as a shape.
Shape LaneShape(const InstructionAttrs& attrs, const Computation& step) {
  return Shape(DType::kF32, GetWholeLoopLayout(attrs, step).lanes);
}

// A whole-loop step's evaluations: each lane computes its values once a step; a per-step
// reduction over the lanes combines the values the lanes computed.
std::unordered_map<const Instruction*, double> StepEvaluations(const InstructionAttrs& attrs, const Computation& step,
                                                               const KeepFn& keep) {
  return EvaluationsOver(step, keep, nullptr, LaneShape(attrs, step));
}

}  // namespace

std::unordered_set<const Instruction*> SharedStepValues(const InstructionAttrs& attrs, const Computation& step) {
  const WholeLoopLayout l = GetWholeLoopLayout(attrs, step);
  auto sizes = [](const Shape& s) {
    std::vector<int64_t> out;
    for (int64_t d : s.dims()) if (d != 1) out.push_back(d);
    return out;
  };
  const std::vector<int64_t> lanes = sizes(Shape(DType::kF32, l.lanes));
  std::unordered_set<const Instruction*> lane_values, shared;
  for (const Instruction* i : step.MakePostOrder()) {
    bool of_lanes = i->opcode() == Opcode::kParameter && i->parameter_number() < l.carries;
    for (const Instruction* o : i->operands()) of_lanes = of_lanes || lane_values.count(o) > 0;
    // Values of the lanes' shape (an xs row read at the lane, an iota over the lanes) are
    // computed lane by lane too.
    of_lanes = of_lanes || (i->shape().IsArray() && !lanes.empty() && sizes(i->shape()) == lanes);
    if (of_lanes) {
      lane_values.insert(i);
    } else if (i->opcode() != Opcode::kParameter && i != step.root()) {
      shared.insert(i);
    }
  }
  return shared;
}

KeepFn StepKeeper(const InstructionAttrs& attrs, const Computation& step) {
  auto dims = std::make_shared<LaneDims>(StepLaneDims(attrs, step));
  auto shared = std::make_shared<std::unordered_set<const Instruction*>>(SharedStepValues(attrs, step));
  double lanes = 1;
  for (int64_t d : GetWholeLoopLayout(attrs, step).lanes) lanes *= static_cast<double>(d);
  return [dims, shared, lanes](const Instruction* x, double e) {
    if (ElementCost(*x) == 0 || !x->shape().IsArray()) return false;  // moves nothing: its operand is kept
    double n = Elements(x->shape());
    if (e <= n * 1.01) return false;
    double bytes = n * DTypeBytes(x->dtype());
    if (shared->count(x)) return bytes <= kMaxKeptUniformBytes;
    if (!dims->count(x)) return false;
    double row = n / lanes;
    return row >= 2 && bytes / lanes <= kMaxKeptLaneRowBytes;
  };
}

bool ScattersRows(const Instruction* scatter) {
  const ScatterDims& s = scatter->attrs().scatter;
  const Shape& operand = scatter->operand(0)->shape();
  const Shape& updates = scatter->operand(2)->shape();
  const int window = operand.rank() - 1;
  if (window < 1 || s.inserted_window_dims != std::vector<int64_t>{0} ||
      s.scatter_dims_to_operand_dims != std::vector<int64_t>{0} ||
      static_cast<int>(s.update_window_dims.size()) != window) {
    return false;
  }
  const int first = updates.rank() - window;
  for (int k = 0; k < window; ++k) {
    if (s.update_window_dims[k] != first + k || updates.dim(first + k) != operand.dim(1 + k)) return false;
  }
  return true;
}

int64_t WholeLoopLaneGroups(const Instruction* kernel, int vector_lanes) {
  if (!kernel || kernel->opcode() != Opcode::kFusion || kernel->fusion_kind() != FusionKind::kWholeLoop) return 0;
  int64_t lanes = 1;
  for (int64_t d : GetWholeLoopLayout(kernel->attrs(), *kernel->fused_computation()).lanes) lanes *= d;
  const int64_t w = vector_lanes;
  if (w <= 1 || lanes < w) return lanes;
  int64_t groups = lanes / 64;
  int64_t rest = lanes % 64;
  if (w < 64) {
    groups += rest / (2 * w);
    rest %= 2 * w;
  }
  return groups + (rest + w - 1) / w;
}

KeptStepValues KeptValues(const InstructionAttrs& attrs, const Computation& step) {
  KeepFn keeps = StepKeeper(attrs, step);
  std::unordered_set<const Instruction*> shared = SharedStepValues(attrs, step);
  KeptStepValues kept;
  StepEvaluations(attrs, step, [&](const Instruction* x, double e) {
    if (!keeps(x, e)) return false;
    (shared.count(x) ? kept.uniform : kept.lane_rows).push_back(x);
    return true;
  });
  // Evaluations visits users first.
  std::reverse(kept.lane_rows.begin(), kept.lane_rows.end());
  std::reverse(kept.uniform.begin(), kept.uniform.end());
  return kept;
}

namespace {

// ElementCost, but for the second of a sine and a cosine of one value in one kernel: both
// are computed from the same range reduction and polynomials (codegen/math.cc), which LLVM
// merges, so it costs a fifth (sin + cos of 2^18 floats: 65 us, a sine alone 52; the
// CartPole step's pole angle).
// A transpose that brings another dimension of its operand to the minor one reads its
// elements one lane at a time (a gather per vector): 0.22-0.5 ns an element on our 2-core
// CPU (median 0.26: [4096, 256] 248 us, [1024, 1024] 528 us, [8, 128, 64] with its last two
// dimensions swapped 14 us), 24 lane-ops at its vector rate; only the bytes counted before
// (50 us estimated for [1024, 1024]). Short output rows are walked in lanes (RowCopy).
constexpr double kGatheredElementCost = 24;
// Read by blocks transposed in registers instead (IsBlockTransposed): four stages of
// shuffles and a stack buffer's store and load per element, about 6 lane-ops.
constexpr double kBlockTransposedElementCost = 6;

bool GathersLanes(const Instruction* transpose) {
  const std::vector<int64_t>& perm = transpose->dimensions();
  const int rank = transpose->shape().rank();
  return rank >= 2 && perm.back() != rank - 1 && transpose->shape().dim(rank - 1) >= 8 &&
         transpose->operand(0)->shape().dim(rank - 1) > 1;
}

double CostInKernel(const Instruction* i) {
  Opcode op = i->opcode();
  if (op == Opcode::kTranspose && GathersLanes(i)) {
    return IsBlockTransposed(i) ? kBlockTransposedElementCost : kGatheredElementCost;
  }
  if (op == Opcode::kSin || op == Opcode::kCos) {
    Opcode partner = op == Opcode::kSin ? Opcode::kCos : Opcode::kSin;
    for (const Instruction* u : i->operand(0)->users()) {
      if (u->opcode() == partner && u->unique_id() < i->unique_id()) return ElementCost(*i) / 5;
    }
  }
  return ElementCost(*i);
}

// The lane-ops of a fused computation's evaluations. A reduction's or a product's cost is
// per element it reads (CostInKernel). Summed in fixed point (1/1024 of a lane-op), so that
// the total does not depend on the map's order: a kernel grown in place (KernelCostCache::Grew) and the same kernel built
// anew, or the same program run again at other addresses, price alike to the last bit.
double Flops(const std::unordered_map<const Instruction*, double>& evals) {
  constexpr double kUnit = 1024;
  int64_t fixed = 0;
  double beyond = 0;  // terms too large for the fixed-point sum (2^40 lane-ops and more)
  for (const auto& [i, e] : evals) {
    double reads = IsReadingMany(i) ? ReadsPerEvaluation(i, 0) : 1.0;
    double term = e * reads * CostInKernel(i);
    if (term < 1099511627776.0) {
      fixed += static_cast<int64_t>(std::llround(term * kUnit));
    } else {
      beyond += term;
    }
  }
  return static_cast<double>(fixed) / kUnit + beyond;
}

}  // namespace

const Shape* RowSpaceOf(const Instruction* kernel) {
  if (kernel->opcode() == Opcode::kFusion) {
    return kernel->fusion_kind() == FusionKind::kWholeLoop ? nullptr : RowSpace(*kernel->fused_computation());
  }
  const Shape& s = kernel->shape();
  return s.IsArray() && s.rank() >= 2 ? &s : nullptr;
}

double FlopsPerElementIn(const Instruction* producer, const Shape* rows) {
  double n = std::max(1.0, Elements(producer->shape()));
  if (producer->opcode() != Opcode::kFusion || producer->fusion_kind() == FusionKind::kWholeLoop) {
    return EstimateKernel(producer).flops / n;
  }
  const Computation& fused = *producer->fused_computation();
  const Shape* own = RowSpace(fused);
  bool same_rows = !own || (rows && rows->SameDims(*own));
  if (same_rows) return EstimateKernel(producer).flops / n;  // its own evaluations: cached
  return Flops(EvaluationsOver(fused, KeepFn{}, nullptr, KernelShape(fused))) / n;
}

namespace {

struct CachedKernel {
  std::optional<std::unordered_map<const Instruction*, double>> evaluations;  // Evaluations(fused)
  std::optional<Shape> rows;          // the RowSpace they were computed for (none: element by element)
  std::optional<Shape> kernel_shape;  // and the KernelShape
  const Instruction* in_place = nullptr;  // and the InPlaceUpdate
  std::optional<KernelCost> cost;
  std::map<int, ShortRows> walks;  // ShortRowWalk by vector width
};
thread_local std::unordered_map<const Instruction*, CachedKernel>* kernel_cache = nullptr;

KernelCost EstimateKernelAnew(const Instruction* instr);

// Evaluations(fused) of `kernel` (a fusion, not a whole loop), from the cache when there is one.
const std::unordered_map<const Instruction*, double>& KernelEvaluations(
    const Instruction* kernel, std::unordered_map<const Instruction*, double>& scratch) {
  const Computation& fused = *kernel->fused_computation();
  if (!kernel_cache) return scratch = Evaluations(fused);
  CachedKernel& cached = (*kernel_cache)[kernel];
  if (!cached.evaluations) {
    cached.evaluations = Evaluations(fused);
    const Shape* rows = RowSpace(fused);
    cached.rows = rows ? std::optional<Shape>(*rows) : std::nullopt;
    cached.kernel_shape = KernelShape(fused);
    cached.in_place = InPlaceUpdate(fused);
  }
  return *cached.evaluations;
}

}  // namespace

namespace {

// ShortRowWalk of `kernel`, from the cache when there is one.
ShortRows CachedShortRowWalk(const Instruction* kernel, int max_width) {
  if (!kernel_cache) return ShortRowWalk(kernel, max_width);
  std::map<int, ShortRows>& walks = (*kernel_cache)[kernel].walks;
  auto it = walks.find(max_width);
  if (it == walks.end()) it = walks.emplace(max_width, ShortRowWalk(kernel, max_width)).first;
  return it->second;
}

}  // namespace

KernelCostCache::KernelCostCache() {
  if (kernel_cache) return;  // an enclosing one serves
  kernel_cache = new std::unordered_map<const Instruction*, CachedKernel>();
  installed_ = true;
}

KernelCostCache::~KernelCostCache() {
  if (!installed_) return;
  delete kernel_cache;
  kernel_cache = nullptr;
}

void KernelCostCache::Forget(const Instruction* kernel) {
  if (kernel_cache) kernel_cache->erase(kernel);
}

// The largest kernel whose grown evaluations FJ_CHECKS compares with a fresh walk (larger
// ones would make the checked test suite quadratic again).
constexpr int64_t kCheckedGrowthSize = 400;

void KernelCostCache::Grew(const Instruction* kernel, const std::vector<const Instruction*>& changed,
                           const std::vector<const Instruction*>& removed) {
  if (!kernel_cache) return;
  auto it = kernel_cache->find(kernel);
  if (it == kernel_cache->end()) return;
  CachedKernel& cached = it->second;
  const Computation& fused = *kernel->fused_computation();
  // An op's evaluations follow from its users' and from the kernel's index space (its rows):
  // where neither changed, from the evaluations it had.
  const Shape& kernel_shape = KernelShape(fused);
  const Shape* rows = RowSpace(fused);
  bool same_space = cached.evaluations && kernel->fusion_kind() != FusionKind::kWholeLoop &&
                    cached.kernel_shape->SameDims(kernel_shape) && cached.rows.has_value() == (rows != nullptr) &&
                    (!rows || rows->SameDims(*cached.rows));
  // In a row kernel an op's evaluations also follow from what lies below it, up to the
  // row's reductions and the kernel's inputs: whether a transcendental op makes a row value
  // worth keeping (IsKeptRowValue), whether a broadcast's value needs a loop of its own
  // (IsRowInvariantBroadcast). Added ops with neither change nothing there.
  for (const Instruction* x : changed) {
    if (!same_space || !rows) break;
    same_space = !IsTranscendental(x->opcode()) && !IsReadingMany(x);
  }
  // An update's root is evaluated over the update or the buffer by whether it is in place,
  // which a fused producer of its operand (or another reader of its buffer) changes. (Erased
  // at every growth, a scan unrolled 32 times, its steps' outputs written into the stacked
  // ys, spent 4 of its 16 s of compilation evaluating its kernels anew.)
  const Instruction* in_place = InPlaceUpdate(fused);
  same_space = same_space && (fused.root()->opcode() != Opcode::kDynamicUpdateSlice || in_place == cached.in_place);
  if (!same_space) {
    kernel_cache->erase(it);
    return;
  }
  cached.walks.clear();
  std::unordered_map<const Instruction*, double>& evals = *cached.evaluations;
  for (const Instruction* r : removed) evals.erase(r);
  EvaluationSpace space{fused.root(), rows, kernel_shape, KeepFn{}, in_place};
  for (const Instruction* x : changed) evals[x] = EvaluationsOf(x, space, evals);
  cached.cost.reset();
  // Under FJ_CHECKS (every test), small kernels are evaluated anew as well: the same values.
  if (GetDebugFlags().checks && fused.instruction_count() <= kCheckedGrowthSize) {
    std::unordered_map<const Instruction*, double> fresh = Evaluations(fused);
    FJ_CHECK(fresh == evals, "the evaluations of %", kernel->name(), " grown in place differ from its own anew");
  }
}

double OperandEvaluations(const Instruction* consumer, int i) {
  if (consumer->opcode() == Opcode::kFusion) {
    std::unordered_map<const Instruction*, double> scratch;
    return EvaluationsAt(KernelEvaluations(consumer, scratch), consumer->fused_computation()->parameter(i));
  }
  return Elements(consumer->shape()) * ReadsPerEvaluation(consumer, i);
}

KernelCost EstimateKernel(const Instruction* instr) {
  if (!kernel_cache || instr->opcode() != Opcode::kFusion) return EstimateKernelAnew(instr);
  CachedKernel& cached = (*kernel_cache)[instr];
  if (!cached.cost) cached.cost = EstimateKernelAnew(instr);
  return *cached.cost;
}

namespace {

// A scatter kernel (codegen/scatter_emitter.cc) reads its updates and indices once, and the
// operand unless it updates it in place, and combines each update element into the output:
// a vector of a row at a time where its windows are whole rows (ScattersRows), else one
// element at a time with its position computed (about 8 scalar ops). Scalar ops count as
// kScalarLaneOps lane-ops each (8-lane vectors). (Priced by the evaluations of its elements,
// it was estimated at 2.6 us for 1.6 M updates that took 800 us.)
constexpr double kScalarLaneOps = 8;

void PriceScatter(const Instruction* kernel, const Instruction* scatter, bool in_place, KernelCost& c) {
  const int updated = in_place ? InPlaceUpdateParameter(*kernel->fused_computation()) : -1;
  c.bytes_read = 0;
  for (int i = 0; i < kernel->operand_count(); ++i) {
    if (i != updated) c.bytes_read += static_cast<double>(kernel->operand(i)->shape().ByteSize());
  }
  const double u = Elements(scatter->operand(2)->shape());
  const double n = Elements(scatter->shape());
  if (ScattersRows(scatter)) {
    const double windows = u / std::max(1.0, n / std::max<double>(1, scatter->shape().dim(0)));
    c.flops = u + windows * 4 * kScalarLaneOps;
  } else {
    c.flops = u * 8 * kScalarLaneOps;
  }
  c.work = u + (in_place ? 0 : n);
}

KernelCost EstimateKernelAnew(const Instruction* instr) {
  KernelCost c;
  c.kernel = instr;
  c.bytes_written = instr->shape().ByteSize();
  if (instr->opcode() == Opcode::kFusion) {
    const Computation& fused = *instr->fused_computation();
    const Instruction* in_place = InPlaceUpdate(fused);
    if (in_place) {
      c.bytes_written = 0;
      for (const Instruction* u : InPlaceUpdates(fused)) c.bytes_written += u->operand(1)->shape().ByteSize();
    }
    bool whole_loop = instr->fusion_kind() == FusionKind::kWholeLoop;
    std::unordered_map<const Instruction*, double> scratch;
    const std::unordered_map<const Instruction*, double>& evals =
        whole_loop ? (scratch = StepEvaluations(instr->attrs(), fused, StepKeeper(instr->attrs(), fused)))
                   : KernelEvaluations(instr, scratch);
    // An operand is read where the kernel reads it: a slice or a dynamic slice of it (a
    // scan's step of its xs, a row of a pool) only there. (Whole loops read theirs anew
    // every step: all of it, in the end.)
    for (int i = 0; i < instr->operand_count(); ++i) {
      const Shape& shape = instr->operand(i)->shape();
      double bytes = static_cast<double>(shape.ByteSize());
      if (!whole_loop && shape.IsArray()) {
        bytes = std::min(bytes, EvaluationsAt(evals, fused.parameter(i)) * DTypeBytes(shape.dtype()));
      }
      c.bytes_read += bytes;
    }
    c.work = Elements(KernelShape(fused));
    if (in_place) {
      c.work = 0;
      for (const Instruction* u : InPlaceUpdates(fused)) c.work += Elements(u->operand(1)->shape());
    }
    c.flops = Flops(evals);
    if (whole_loop) {
      std::unordered_set<const Instruction*> shared = SharedStepValues(instr->attrs(), fused);
      std::unordered_map<const Instruction*, double> of_shared;
      for (const auto& [i, e] : evals) {
        if (shared.count(i)) of_shared[i] = e;
      }
      c.shared_flops = Flops(of_shared);
      c.flops -= c.shared_flops;
    }
    for (const auto& [i, e] : evals) {
      c.work = std::max(c.work, e);
      c.row_steps += RowStepsOf(i);   // every op of the computation has its evaluations
    }
    const bool copies = CopiesProgramParameter(instr);
    if (in_place && copies) {
      const int slot = InPlaceUpdateOperand(instr);
      c.bytes_read += static_cast<double>(instr->operand(slot)->shape().ByteSize());
      c.bytes_written = instr->shape().ByteSize();
      c.work = std::max(c.work, Elements(instr->shape()));
    }
    if (fused.root()->opcode() == Opcode::kScatter) {
      PriceScatter(instr, fused.root(), InPlaceUpdateParameter(fused) >= 0 && !copies, c);
      c.row_steps = 0;
    }
    // A whole-loop kernel's computation is one step: every lane runs every step.
    if (whole_loop) {
      int64_t count = instr->attrs().trip_count;  // -1: until its lanes are done
      double trips = count >= 0 ? static_cast<double>(std::max<int64_t>(count, 1)) : kUnknownTripCount;
      c.flops *= trips;
      c.shared_flops *= trips;
      c.work *= trips;
    }
  } else {
    bool sliced = instr->opcode() == Opcode::kSlice || instr->opcode() == Opcode::kDynamicSlice;
    for (int i = 0; i < instr->operand_count(); ++i) {
      const Instruction* op = instr->operand(i);
      // A slice reads only its output's elements of its operand.
      c.bytes_read += sliced && i == 0 ? static_cast<double>(instr->shape().ByteSize())
                                       : static_cast<double>(op->shape().ByteSize());
    }
    double per = 1;
    if (instr->operand_count() > 0) per = ReadsPerEvaluation(instr, 0);
    c.flops = Elements(instr->shape()) * per * CostInKernel(instr);
    c.work = Elements(instr->shape()) * per;
    c.row_steps = RowStepsOf(instr);
    if (instr->opcode() == Opcode::kCustomCall) PriceCustomCall(instr, c);
  }
  return c;
}

}  // namespace

namespace {

// A kernel's arithmetic on `target`: lane-ops in vectors, and lane-ops one element at a
// time. Its short rows (ShortRowWalk) walked one element at a time make all of its ops
// scalar, and so do the tails of rows with vectors along them (rows of 15 on 8 lanes: 7 of
// every 15 elements). Walked in lanes, each element copied in or out costs (RowCopy),
// measured on bias adds over 2^20 floats: by a shuffle tree, lane-ops growing with the
// rows' length (an output vector takes lanes from as many input vectors: 0.6 for rows of
// 2, 1.8 for 4, 7.8 for 8); by the transpose, its 16 + 64 + length vector steps per block
// (3.3 lane-ops for rows of 9, 2.4 for 15); element by element, 1.6 scalar ops.
std::pair<double, double> VectorAndScalarOps(const KernelCost& c, const Target& target) {
  double vector = c.row_steps * target.vector_lanes;
  // A whole loop's shared values: one element at a time, by each group of lanes that steps
  // (WholeLoopLaneGroups), in registers as its vectors are.
  double scalar = c.shared_flops * static_cast<double>(WholeLoopLaneGroups(c.kernel, target.vector_lanes)) /
                  target.whole_loop_register_gain;
  ShortRows walk = c.kernel ? CachedShortRowWalk(c.kernel, target.vector_lanes) : ShortRows{};
  vector += c.flops * (1 - walk.scalar_share);
  scalar += c.flops * walk.scalar_share;
  if (walk.in_lanes && walk.length > 0) {
    double length = static_cast<double>(walk.length);
    vector += walk.copied[static_cast<int>(RowCopy::kShuffleTree)] * (0.12 * length * length + 0.2);
    vector += walk.copied[static_cast<int>(RowCopy::kTranspose)] * 5.5 * (80 + length) / (16 * length);
    scalar += walk.copied[static_cast<int>(RowCopy::kElementwise)] * 1.6;
  }
  return {vector, scalar};
}

}  // namespace

bool RunsInParallel(const KernelCost& c, const Target& target) {
  auto [vector, scalar] = VectorAndScalarOps(c, target);
  double lane_ops = vector + scalar * target.flops_per_us / target.scalar_ops_per_us;
  return c.work >= static_cast<double>(target.parallel_min_work) || lane_ops >= target.parallel_min_lane_ops;
}

double CostModel::TimeUs(const KernelCost& c) const {
  // Up to the cache's size the bytes move at its bandwidth, from twice it on all at
  // memory's (streaming evicts what was cached), between the two times interpolated.
  double bytes = c.bytes();
  const double cache = target.cache_bytes;
  double memory_us = bytes / target.bytes_per_us;
  if (cache > 0 && bytes > cache) {
    const double at_cache = cache / target.bytes_per_us, at_twice = 2 * cache / target.dram_bytes_per_us;
    memory_us = bytes >= 2 * cache ? bytes / target.dram_bytes_per_us
                                   : at_cache + (at_twice - at_cache) * (bytes - cache) / cache;
  }
  auto [vector, scalar] = VectorAndScalarOps(c, target);
  bool whole_loop = c.kernel && c.kernel->opcode() == Opcode::kFusion && c.kernel->fusion_kind() == FusionKind::kWholeLoop;
  double rate = whole_loop ? target.whole_loop_flops_per_us : target.flops_per_us;
  double us = std::max(memory_us, vector / rate + scalar / target.scalar_ops_per_us);
  if (!RunsInParallel(c, target)) {
    us *= target.serial_slowdown;
  } else {
    us += target.parallel_launch_us;
  }
  return target.launch_us + us + c.host_us;
}

namespace {


void AddComputation(const Computation& c, double runs, const CostModel& model, ProgramCost& cost) {
  for (const Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion || i->opcode() == Opcode::kCustomCall) {
      cost.kernels += 1;
      cost.us += runs * model.TimeUs(EstimateKernel(i));
    } else if (i->opcode() == Opcode::kWhile) {
      int64_t trips = i->attrs().trip_count;
      double n = trips >= 0 ? static_cast<double>(trips) : kUnknownTripCount;
      if (trips < 0) AddComputation(*i->while_condition(), runs * (n + 1), model, cost);
      AddComputation(*i->while_body(), runs * n, model, cost);
    } else if (i->opcode() == Opcode::kConditional) {
      for (const Computation* branch : i->called_computations()) AddComputation(*branch, runs, model, cost);
    }
  }
}

}  // namespace

ProgramCost EstimateProgram(const Module& module, const CostModel& model) {
  ProgramCost cost;
  AddComputation(*module.entry(), 1.0, model, cost);
  return cost;
}

}  // namespace fj
