// Fusibility predicates (XLA's gpu_fusible.cc and instruction_fusion.cc rules, see the
// research notes), each returning a decision with a reason. Shared by every fusion pass.
#pragma once

#include "analysis/kernel_heroes.h"
#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "ir/computation.h"

namespace fj {

// Ops legacy XLA will not duplicate (IsExpensive), with XLA:GPU's override: divide, sqrt,
// rsqrt and exp are cheap for f32; sin, cos and tan are cheap for real types in XLA's own
// list. A fusion is expensive if any op in it is.
bool IsExpensive(const Instruction* instr);

// Ops that may always be duplicated: broadcast and widening converts.
bool IsAlwaysDuplicable(const Instruction* instr);

// Whether `consumer` reads some element of operand `i` more than once (broadcasts,
// contractions, reduction inits; for a fusion, any such path from the fused parameter).
bool ReusesOperandElements(const Instruction* consumer, int i);

// Ops a kernel can compute from its operands (everything but parameters, constants of
// more than one element, tuples, control flow and custom calls).
bool IsLoopFusibleProducer(const Instruction* instr);
bool IsFusibleConsumer(const Instruction* instr);
// Whether `consumer` (an op or a loop fusion) reads `producer` only through elementwise ops
// at its own positions, up to a single result of the producer's shape: an epilogue.
bool ReadsOnlyElementwise(const Instruction* producer, const Instruction* consumer);
// IsReduction and ReductionHero: analysis/kernel_heroes.h.

// How many times the emitter would compute `instr` inside `fused`: the number of distinct
// indices it is requested with (XLA's FusionNodeIndexingEvaluation), at most
// kEmittedCountCap.
inline constexpr size_t kEmittedCountCap = 64;
int EmittedCount(const Computation& fused, const Instruction* instr);
// The same for a producer fused into `consumer` (a fusion or a single op).
int EmittedCountOfProducer(const Instruction* producer, const Instruction* consumer);
// The largest EmittedCount of any instruction in `fused`.
int MaxEmittedCount(const Computation& fused);
// While one is alive on a thread, the counts above are computed once per fused computation
// (a walk over all of it) and then looked up: the fusion passes ask about one kernel for
// each of its candidate producers, and kernels of thousands of ops (unrolled loops) made
// that walk the compiler's hot spot. Fusing builds a new computation and frees none until
// the pass ends (Module::ReleaseRemoved), so a pass may hold one for its whole run; what
// changes a fused computation in place while it lives says so (Update).
class EmittedCountCache {
 public:
  // For what changes `fused` in place (FuseIntoFusion): the instructions it added, and those
  // that gained users, users before operands. The others keep their counts: their users
  // did not change.
  static void Update(const Computation& fused, const std::vector<const Instruction*>& changed);

  EmittedCountCache();
  ~EmittedCountCache();
  EmittedCountCache(const EmittedCountCache&) = delete;
  EmittedCountCache& operator=(const EmittedCountCache&) = delete;

 private:
  bool installed_ = false;
};
// How often the most duplicated op of `producer` would be emitted in a consumer that emits
// the producer `emitted` times (EmittedCountOfProducer): that count times the largest
// count inside the producer (XLA's MaxCodeDuplicationTooHigh). Fusions of fusions multiply:
// a scan's odd/even rounds fused one into the next emit the first round's ops 2^rounds
// times. At most kEmittedCountCap.
int CodeDuplication(const Instruction* producer, int emitted);

// Operands plus outputs of the fusion that fusing `producer` into `consumer` would make.
int FusedOperandsAndOutputs(const Instruction* producer, const Instruction* consumer);

// The shape a kernel iterates over: the root's (for a multi-output fusion, the first
// root's), or a reduction hero's input for input fusions.
const Shape& LoopShape(const Instruction* kernel);

// XLA's CodeDuplicationTooHigh for the ops that invalidate its emitter's cache
// (concatenate, pad, dynamic-update-slice): an output of `kernel` (a fusion or a single op)
// that is such an op and has more users than the profile allows (concat_max_users for a
// concatenate, one for the others), or null. Such a kernel is not merged with its users by
// any pass: each would re-evaluate it.
// With `consumer`, also an output that `consumer` would evaluate more often than allowed.
const Instruction* ConcatLikeOutputWithTooManyUsers(const Instruction* kernel, const FusionProfile& profile,
                                                    const Instruction* consumer = nullptr);

// True if some path leads from `from` to `to` (through operands), in one computation.
bool Reachable(const Instruction* from, const Instruction* to);

}  // namespace fj
