// A reference evaluator for single instructions over literals, used by constant folding.
// Its integer and conversion semantics are the ones codegen implements (and documents):
// x / 0 == -1, x % 0 == x, INT_MIN / -1 == INT_MIN, over-wide shifts give 0 (or the sign
// for arithmetic right shifts), float -> int conversion saturates and maps NaN to 0.
#pragma once

#include <optional>
#include <vector>

#include "ir/instruction.h"

namespace fj {

// Evaluates `instr` with the given operand values. Returns nullopt for opcodes the
// evaluator does not handle (parameters, control flow, custom calls, fusions).
std::optional<Literal> EvaluateInstruction(const Instruction& instr,
                                           const std::vector<const Literal*>& operands);

// Evaluates a computation whose parameters are bound to `args` (combiners, small bodies).
std::optional<Literal> EvaluateComputation(const Computation& c,
                                           const std::vector<const Literal*>& args);

}  // namespace fj
