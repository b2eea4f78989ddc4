// The verifier: structural and shape checks of a whole module, run after every pass when
// FJ_CHECKS=1 and on everything built from Python or parsed from text.
#pragma once

#include "ir/module.h"

namespace fj {

// Throws fj::Error(kInvalidArgument) naming the first broken rule and the instruction.
void VerifyModule(const Module& module);

}  // namespace fj
