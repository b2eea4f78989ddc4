// Graphviz DOT output of a module: one node per instruction, edges from operands to users,
// each fusion drawn as a cluster holding its fused instructions (the paper's Fig. 3).
#pragma once

#include <string>

#include "ir/module.h"

namespace fj {

std::string ModuleToDot(const Module& module);

}  // namespace fj
