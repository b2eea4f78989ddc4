// The CPU cost model (see cost_model.h).
#include "analysis/cost_model.h"

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "ir/whole_loop.h"

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
    case Opcode::kBroadcast:
      // A scalar (or tiny) operand is the same for every lane of a vector group: computed
      // once per group of kCpuLanes elements, not per element.
      return user->operand(0)->shape().NumElements() <= 1 ? 1.0 / kCpuLanes : 1.0;
    default:
      return 1.0;
  }
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
    case Opcode::kRemainder:
      return 4.0 * wide;
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
      return 4.0 * wide;
    case Opcode::kExp:
    case Opcode::kLog:
      return 12.0 * wide;
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
    case Opcode::kDot:
      return 1.0 * wide;  // per element read (see ReadsPerEvaluation)
    default:
      return 1.0 * wide;
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

const Shape& KernelShape(const Computation& fused) {
  const Instruction* root = fused.root();
  return root->opcode() == Opcode::kTuple ? root->operand(0)->shape() : root->shape();
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

std::unordered_map<const Instruction*, double> Evaluations(const Computation& fused, const KeepFn& keep) {
  std::unordered_map<const Instruction*, double> evals;
  std::vector<Instruction*> order = fused.MakePostOrder();
  const Instruction* root = fused.root();
  const Shape& kernel = KernelShape(fused);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Instruction* x = *it;
    double e = 0;
    if (x == root) {
      e = root->opcode() == Opcode::kTuple ? 0 : Elements(root->shape());
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
      bool at_own_index = u->opcode() == Opcode::kTuple || full_reduction_of_kernel_space ||
                          (IsElementwise(u->opcode()) && u->shape().IsArray() && x->shape().IsArray() &&
                           u->shape().SameDims(x->shape()));
      for (int i = 0; i < u->operand_count(); ++i) {
        if (u->operand(i) != x) continue;
        if (u->opcode() == Opcode::kTuple) {
          per = std::max(per, Elements(x->shape()));
        } else {
          per += evals[u] * ReadsPerEvaluation(u, i);
        }
      }
      if (at_own_index) {
        same_index = std::max(same_index, per);
      } else {
        e += per;
      }
    }
    e += same_index;
    if (IsPerRowReduction(x, kernel)) e = std::min(e, Elements(x->shape()));  // once per row
    if (IsKeptRowValue(x, kernel)) e = std::min(e, Elements(x->shape()));     // once per element
    if (keep && keep(x, e)) e = std::min(e, Elements(x->shape()));
    evals[x] = e;
  }
  return evals;
}

KeepFn LaneRowKeeper(const InstructionAttrs& attrs, const Computation& step) {
  auto dims = std::make_shared<LaneDims>(StepLaneDims(attrs, step));
  double lanes = 1;
  for (int64_t d : GetWholeLoopLayout(attrs, step).lanes) lanes *= static_cast<double>(d);
  return [dims, lanes](const Instruction* x, double e) {
    if (!dims->count(x) || ElementCost(*x) == 0) return false;  // moves nothing: its operand is kept
    double n = Elements(x->shape());
    double row = n / lanes;
    return row >= 2 && row * DTypeBytes(x->dtype()) <= kMaxKeptLaneRowBytes && e > n * 1.01;
  };
}

std::vector<const Instruction*> KeptLaneRows(const InstructionAttrs& attrs, const Computation& step) {
  KeepFn keeps = LaneRowKeeper(attrs, step);
  std::vector<const Instruction*> kept;
  Evaluations(step, [&](const Instruction* x, double e) {
    if (!keeps(x, e)) return false;
    kept.push_back(x);
    return true;
  });
  std::reverse(kept.begin(), kept.end());  // Evaluations visits users first
  return kept;
}

double OperandEvaluations(const Instruction* consumer, int i) {
  if (consumer->opcode() == Opcode::kFusion) {
    std::unordered_map<const Instruction*, double> evals = Evaluations(*consumer->fused_computation());
    return evals[consumer->fused_computation()->parameter(i)];
  }
  return Elements(consumer->shape()) * ReadsPerEvaluation(consumer, i);
}

KernelCost EstimateKernel(const Instruction* instr) {
  KernelCost c;
  for (const Instruction* op : instr->operands()) c.bytes_read += op->shape().ByteSize();
  c.bytes_written = instr->shape().ByteSize();
  if (instr->opcode() == Opcode::kFusion) {
    const Computation& fused = *instr->fused_computation();
    bool whole_loop = instr->fusion_kind() == FusionKind::kWholeLoop;
    std::unordered_map<const Instruction*, double> evals =
        Evaluations(fused, whole_loop ? LaneRowKeeper(instr->attrs(), fused) : KeepFn{});
    for (const auto& [i, e] : evals) c.flops += e * ElementCost(*i);
    // A whole-loop kernel's computation is one step: every lane runs every step.
    if (instr->fusion_kind() == FusionKind::kWholeLoop) c.flops *= static_cast<double>(std::max<int64_t>(instr->attrs().trip_count, 1));
  } else {
    double per = 1;
    if (instr->operand_count() > 0) per = ReadsPerEvaluation(instr, 0);
    c.flops = Elements(instr->shape()) * per * ElementCost(*instr);
  }
  return c;
}

double CostModel::TimeUs(const KernelCost& c) const {
  return launch_us + std::max(c.bytes() / bytes_per_us, c.flops / flops_per_us);
}

namespace {

// Loops whose trip count is not known are assumed to run this often.
constexpr double kUnknownTripCount = 10;

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
