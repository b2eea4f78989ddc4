// Copying computations: deep clones (loops and branches nested in them get copies of
// their own, since buffer assignment and codegen key on computations) and inlining a call
// into another computation (loop unrolling, whole-loop fusion).
#pragma once

#include <string>
#include <unordered_map>

#include "ir/module.h"

namespace fj {

// A copy of `c` in its module, named from `name_hint`. The conditions, bodies, branches
// and fused computations it calls are copied too; reduction combiners are shared.
Computation* CloneComputation(const Computation& c, const std::string& name_hint);

// Copies `callee`'s instructions into `into`, its parameter i bound to `arguments[i]`;
// returns the copy of its root. `map`, if given, receives original -> copy.
Instruction* InlineComputation(const Computation& callee, Computation* into,
                               const std::vector<Instruction*>& arguments,
                               std::unordered_map<const Instruction*, Instruction*>* map = nullptr);

}  // namespace fj
