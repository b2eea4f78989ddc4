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

// The members' fusion kind: input if it is built around a reduction, output around a dot,
// else loop.
FusionKind ChooseFusionKind(const Computation& fused);

}  // namespace fj
