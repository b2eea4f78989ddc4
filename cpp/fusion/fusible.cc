// Fusibility predicates (see fusible.h).
#include "fusion/fusible.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "support/error.h"
#include "support/flags.h"

namespace fj {
namespace {

bool IsDivisorConstant(const Instruction* instr) {
  const Instruction* d = instr->operand(1);
  while (d->opcode() == Opcode::kBroadcast) d = d->operand(0);
  return d->opcode() == Opcode::kConstant && d->shape().NumElements() == 1;
}

bool OpIsExpensive(const Instruction* instr) {
  Opcode op = instr->opcode();
  bool f32 = instr->shape().IsArray() && instr->dtype() == DType::kF32;
  switch (op) {
    case Opcode::kDivide:
    case Opcode::kRemainder:
      if (IsFloat(instr->operand(0)->dtype())) return !(op == Opcode::kDivide && f32);
      return !IsDivisorConstant(instr);
    case Opcode::kExp:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
      return !f32;
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kTan:
      return false;  // cheap for non-complex types in XLA's list
    case Opcode::kReduce:
    case Opcode::kArgMax:
    case Opcode::kArgMin:
    case Opcode::kDot:
    case Opcode::kCustomCall:
    case Opcode::kWhile:
    case Opcode::kConditional:
    case Opcode::kCall:
      return true;
    default:
      return IsTranscendental(op);
  }
}

}  // namespace

bool IsExpensive(const Instruction* instr) {
  if (instr->opcode() == Opcode::kFusion) {
    for (const Instruction* i : instr->fused_computation()->MakePostOrder()) {
      if (IsExpensive(i)) return true;
    }
    return false;
  }
  return OpIsExpensive(instr);
}

bool IsAlwaysDuplicable(const Instruction* instr) {
  if (instr->opcode() == Opcode::kBroadcast || instr->opcode() == Opcode::kIota) return true;
  if (instr->opcode() == Opcode::kConvert) {
    return DTypeBytes(instr->operand(0)->dtype()) < DTypeBytes(instr->dtype());
  }
  return false;
}

bool ReusesOperandElements(const Instruction* consumer, int i) {
  switch (consumer->opcode()) {
    case Opcode::kBroadcast:
      return consumer->shape().NumElements() > consumer->operand(0)->shape().NumElements();
    case Opcode::kDot:
      return true;
    case Opcode::kReduce:
      return i == 1;  // the init value
    case Opcode::kPad:
      return i == 1;
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
      return i >= (consumer->opcode() == Opcode::kDynamicSlice ? 1 : 2);
    case Opcode::kGather:
      // The operand's elements may be read by many indices; an index by every element of
      // its slice.
      return i == 0 || consumer->shape().NumElements() > consumer->operand(1)->shape().NumElements();
    case Opcode::kFusion: {
      const Computation* fused = consumer->fused_computation();
      // Any use of the parameter through a reusing op reuses it.
      std::vector<const Instruction*> work = {fused->parameter(i)};
      std::unordered_set<const Instruction*> seen;
      while (!work.empty()) {
        const Instruction* x = work.back();
        work.pop_back();
        if (!seen.insert(x).second) continue;
        for (const Instruction* u : x->users()) {
          for (int k = 0; k < u->operand_count(); ++k) {
            if (u->operand(k) == x && ReusesOperandElements(u, k)) return true;
          }
          work.push_back(u);
        }
      }
      return false;
    }
    default:
      return false;
  }
}

bool IsLoopFusibleProducer(const Instruction* instr) {
  if (IsStructural(instr->opcode())) return false;
  switch (instr->opcode()) {
    case Opcode::kDot:
    case Opcode::kScatter:
      return false;
    case Opcode::kConstant:
      return instr->shape().NumElements() == 1;  // large constants stay buffers
    case Opcode::kFusion:
      return instr->fusion_kind() == FusionKind::kLoop && !instr->shape().IsTuple();
    default:
      return instr->shape().IsArray();
  }
}

bool IsFusibleConsumer(const Instruction* instr) {
  if (IsStructural(instr->opcode())) return false;
  switch (instr->opcode()) {
    case Opcode::kConstant:
    case Opcode::kDot:
    case Opcode::kScatter:
      return false;
    case Opcode::kFusion:
      // Dot, whole-loop and scatter kernels are final.
      return instr->fusion_kind() != FusionKind::kOutput && instr->fusion_kind() != FusionKind::kWholeLoop &&
             instr->fusion_kind() != FusionKind::kScatter;
    default:
      return instr->shape().IsArray();
  }
}

bool ReadsOnlyElementwise(const Instruction* producer, const Instruction* consumer) {
  if (!producer->shape().IsArray() || !consumer->shape().SameDims(producer->shape())) return false;
  if (consumer->opcode() != Opcode::kFusion) return IsElementwise(consumer->opcode());
  if (consumer->fusion_kind() != FusionKind::kLoop || consumer->shape().IsTuple()) return false;
  const Computation& c = *consumer->fused_computation();
  for (int i = 0; i < consumer->operand_count(); ++i) {
    if (consumer->operand(i) == producer && !ReadOnlyAtOwnPositions(c.parameter(i))) return false;
  }
  return true;
}

namespace {

// The "index sources" of every instruction of `fused` (EmittedCount: how many there are),
// and the largest count.
struct EmittedCounts {
  std::unordered_map<const Instruction*, std::vector<uint64_t>> sources;  // sorted, at most the cap
  int largest = 0;
};

// Sets the sources of `x` from those of its users. An instruction is requested with the
// root's own index, or one new index per (index-changing user, operand slot, user's
// source); elementwise users pass theirs on. Capped at kEmittedCountCap: only the count
// matters. (Sorted vectors: in kernels of thousands of ops, e.g. unrolled chains of PRNG
// key splits, std::sets were the compiler's hot spot.)
void SetSources(EmittedCounts& counts, const Computation& fused, const Instruction* x, std::vector<uint64_t>& s) {
  s.clear();
  if (x == fused.root()) s.push_back(0);
  for (const Instruction* u : x->users()) {
    auto at = counts.sources.find(u);
    if (at == counts.sources.end()) continue;
    const std::vector<uint64_t>& from = at->second;
    for (int k = 0; k < u->operand_count(); ++k) {
      if (u->operand(k) != x) continue;
      bool forwards = u->opcode() == Opcode::kTuple ||
                      (IsElementwise(u->opcode()) && u->shape().IsArray() && x->shape().SameDims(u->shape()));
      if (forwards) {
        s.insert(s.end(), from.begin(), from.end());
      } else {
        // A new index per source of the user (ids are unique in the module).
        uint64_t id = (static_cast<uint64_t>(u->unique_id()) + 1) << 32 | static_cast<uint64_t>(k) << 12;
        for (size_t m = 0; m < from.size() && m < kEmittedCountCap; ++m) s.push_back(id | m);
      }
    }
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  if (s.size() > kEmittedCountCap) s.resize(kEmittedCountCap);
  counts.largest = std::max(counts.largest, static_cast<int>(s.size()));
  counts.sources[x] = s;
}

EmittedCounts CountEmitted(const Computation& fused) {
  std::vector<Instruction*> order = fused.MakePostOrder();
  EmittedCounts counts;
  counts.sources.reserve(order.size());
  std::vector<uint64_t> s;
  for (auto it = order.rbegin(); it != order.rend(); ++it) SetSources(counts, fused, *it, s);
  return counts;
}

thread_local std::unordered_map<const Computation*, EmittedCounts>* emitted_cache = nullptr;

// The counts of `fused`: from the thread's cache where there is one.
const EmittedCounts& CountsOf(const Computation& fused, EmittedCounts& scratch) {
  if (!emitted_cache) return scratch = CountEmitted(fused);
  auto it = emitted_cache->find(&fused);
  if (it == emitted_cache->end()) it = emitted_cache->emplace(&fused, CountEmitted(fused)).first;
  return it->second;
}

}  // namespace

EmittedCountCache::EmittedCountCache() {
  if (emitted_cache) return;  // an enclosing one serves
  emitted_cache = new std::unordered_map<const Computation*, EmittedCounts>();
  installed_ = true;
}

void EmittedCountCache::Update(const Computation& fused, const std::vector<const Instruction*>& changed) {
  if (!emitted_cache) return;
  auto it = emitted_cache->find(&fused);
  if (it == emitted_cache->end()) return;
  std::vector<uint64_t> s;
  for (const Instruction* x : changed) SetSources(it->second, fused, x, s);
  // Checked against counts made afresh (FJ_CHECKS), for kernels small enough that this
  // does not make growing them quadratic again.
  if (GetDebugFlags().checks && fused.instruction_count() <= 512) {
    EmittedCounts anew = CountEmitted(fused);
    for (const auto& [x, sources] : anew.sources) {
      auto kept = it->second.sources.find(x);
      FJ_CHECK(kept != it->second.sources.end() && kept->second.size() == sources.size(),
               "emitted count of %", x->name(), " in ", fused.name(), " kept wrong by an in-place fusion");
    }
  }
}

EmittedCountCache::~EmittedCountCache() {
  if (!installed_) return;
  delete emitted_cache;
  emitted_cache = nullptr;
}

int EmittedCount(const Computation& fused, const Instruction* instr) {
  EmittedCounts scratch;
  const EmittedCounts& counts = CountsOf(fused, scratch);
  auto it = counts.sources.find(instr);
  return it == counts.sources.end() ? 0 : static_cast<int>(it->second.size());
}

int MaxEmittedCount(const Computation& fused) {
  EmittedCounts scratch;
  return CountsOf(fused, scratch).largest;
}

int CodeDuplication(const Instruction* producer, int emitted) {
  // Emitted once, the producer's code is there once: nothing to multiply (and the count
  // inside it is not computed for every candidate pair).
  if (emitted <= 1 || producer->opcode() != Opcode::kFusion) return emitted;
  int64_t inner = std::max(MaxEmittedCount(*producer->fused_computation()), 1);
  return static_cast<int>(std::min<int64_t>(int64_t{emitted} * inner, kEmittedCountCap));
}

int EmittedCountOfProducer(const Instruction* producer, const Instruction* consumer) {
  if (consumer->opcode() != Opcode::kFusion) {
    int uses = 0;
    for (const Instruction* op : consumer->operands()) uses += op == producer;
    return IsElementwise(consumer->opcode()) ? 1 : uses;
  }
  const Computation* fused = consumer->fused_computation();
  int total = 0;
  for (int i = 0; i < consumer->operand_count(); ++i) {
    if (consumer->operand(i) == producer) total += EmittedCount(*fused, fused->parameter(i));
  }
  return total;
}

int FusedOperandsAndOutputs(const Instruction* producer, const Instruction* consumer) {
  std::unordered_set<const Instruction*> operands;
  for (const Instruction* op : consumer->operands()) {
    if (op != producer) operands.insert(op);
  }
  for (const Instruction* op : producer->operands()) operands.insert(op);
  int outputs = consumer->shape().IsTuple() ? static_cast<int>(consumer->shape().tuple_shapes().size()) : 1;
  return static_cast<int>(operands.size()) + outputs;
}

const Shape& LoopShape(const Instruction* kernel) {
  if (kernel->opcode() == Opcode::kFusion) {
    const Computation* fused = kernel->fused_computation();
    if (const Instruction* hero = ReductionHero(*fused)) return hero->operand(0)->shape();
    const Instruction* root = fused->root();
    if (root->opcode() == Opcode::kTuple) return root->operand(0)->shape();
    return root->shape();
  }
  if (IsReduction(kernel)) return kernel->operand(0)->shape();
  return kernel->shape();
}

const Instruction* ConcatLikeOutputWithTooManyUsers(const Instruction* kernel, const FusionProfile& profile,
                                                    const Instruction* consumer) {
  auto allowed = [&](const Instruction* v) {
    switch (v->opcode()) {
      case Opcode::kConcatenate: return profile.concat_max_users;
      case Opcode::kPad:
      case Opcode::kDynamicUpdateSlice: return 1;
      default: return -1;  // not concat-like
    }
  };
  int emitted = consumer ? EmittedCountOfProducer(kernel, consumer) : 0;
  auto check = [&](const Instruction* value, int users) -> const Instruction* {
    int limit = allowed(value);
    return limit >= 0 && (users > limit || emitted > limit) ? value : nullptr;
  };
  if (kernel->opcode() != Opcode::kFusion) return check(kernel, kernel->user_count());
  const Instruction* root = kernel->fused_computation()->root();
  if (root->opcode() != Opcode::kTuple) return check(root, kernel->user_count());
  for (const Instruction* gte : kernel->users()) {
    if (gte->opcode() != Opcode::kGetTupleElement) continue;
    if (const Instruction* v = check(root->operand(static_cast<int>(gte->tuple_index())), gte->user_count())) return v;
  }
  return nullptr;
}

bool Reachable(const Instruction* from, const Instruction* to) {
  // Does `to` depend on `from`? Walk `to`'s operands.
  std::vector<const Instruction*> work = {to};
  std::unordered_set<const Instruction*> seen;
  while (!work.empty()) {
    const Instruction* x = work.back();
    work.pop_back();
    if (x == from) return true;
    if (!seen.insert(x).second) continue;
    for (const Instruction* op : x->operands()) work.push_back(op);
  }
  return false;
}

}  // namespace fj
