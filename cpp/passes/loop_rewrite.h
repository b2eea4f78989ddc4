// Helpers of the passes that rewrite a while loop's state (carry split, loop-output
// reduction, loop-invariant layout): each builds a loop of a new state from the old one and
// puts it in the old one's place.
#pragma once

#include <functional>
#include <vector>

#include "ir/builder.h"
#include "ir/module.h"

namespace fj {

// Calls `rewrite(loop)` on every while loop of every control-flow computation (the loops of
// a computation collected first: a rewrite replaces a loop and the readers of its result).
// Returns whether any call did.
bool RewriteLoops(Module& module, const std::function<bool(Instruction* loop)>& rewrite);

// A copy of `c` (a loop's body or condition) that takes a state of shape `state`: `unpack`
// gives, from the new parameter, the old state's elements, on which `c` is inlined; for a
// body, `repack` gives the new root from the parameter and the inlined old root (null
// `repack`: the old root as it is).
using Unpack = std::function<std::vector<Instruction*>(Builder& b, Instruction* param)>;
using Repack = std::function<Instruction*(Builder& b, Instruction* param, Instruction* old_root)>;
Computation* WithNewState(const Computation& c, const Shape& state, const Unpack& unpack,
                          const Repack& repack = nullptr);

// A loop like `loop` (its attributes and source) over the state `init`, a tuple whose
// computations are `loop`'s with `unpack` and `repack` (see WithNewState; the condition
// takes `unpack` only).
Instruction* RebuildLoop(Instruction* loop, Instruction* init, const Unpack& unpack, const Repack& repack);

// Puts `rewritten` in `loop`'s place, whose result is read only by get-tuple-elements:
// each reads `result(b, k)` instead (element k of the old state rebuilt from `rewritten`).
// Removes them and `loop`.
void ReplaceLoop(Instruction* loop, const std::function<Instruction*(Builder& b, int64_t k)>& result);

}  // namespace fj
