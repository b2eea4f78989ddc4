// Building fusions. One general operation, FuseInstructions, makes a kernel out of a set of
// instructions (plain ops or fusions): producer-into-consumer fusion, fusion merging,
// multi-output and horizontal fusion are all calls of it with different sets.
#pragma once

#include <unordered_set>
#include <vector>

#include "ir/module.h"

namespace fj {

// The fusion kind an instruction gets when it is the root (hero) of a kernel.
FusionKind KernelKindFor(const Instruction* instr);

// True for instructions that need a kernel of their own when left unfused.
bool NeedsKernel(const Instruction* instr);

// Replaces `members` (instructions of one computation, each a plain op or a fusion, in any
// order) by one fusion computing all of them. Values used outside the set (or returned)
// become the fusion's outputs: one output gives an array-shaped fusion, several a tuple
// whose elements users read through get-tuple-element. Members in `duplicated` are copied
// into the fusion but stay in place for their users outside it (no output). The caller
// guarantees the result is acyclic (no path from a member through a non-member back into
// the set). Returns the new fusion instruction.
Instruction* FuseInstructions(const std::vector<Instruction*>& members,
                              const std::unordered_set<const Instruction*>& duplicated = {});

// Wraps a single instruction into a fusion of the kind it calls for.
Instruction* WrapInFusion(Instruction* instr);
// Fuses `producer` (an array-valued op or single-output fusion) into the fusion `consumer`
// in place, as XLA's HloFusionInstruction::FuseInstruction: the producer's ops are cloned
// into the consumer's computation, the parameters that read it read the clone, and its
// operands become the consumer's (shared where the consumer reads them already). The
// producer stays for its other users if `duplicate`, else it is removed. Costs the
// producer's size, where FuseInstructions rebuilds the whole consumer: growing a kernel of
// n ops one producer at a time was quadratic. Returns null, changing nothing, where the
// kernel's kind would change (FuseInstructions then names the new kernel).
Instruction* FuseIntoFusion(Instruction* producer, Instruction* consumer, bool duplicate);

// The members' fusion kind: input if it is built around a reduction, output around a dot,
// else loop.
FusionKind ChooseFusionKind(const Computation& fused);

}  // namespace fj
