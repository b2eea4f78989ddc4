// Opcodes, generated from the one table in opcodes.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fj {

enum class Opcode : uint8_t {
#define FJ_OPCODE(name, spelling, arity, flags) k##name,
#include "ir/opcodes.def"
#undef FJ_OPCODE
};

std::string_view OpcodeName(Opcode op);
std::optional<Opcode> ParseOpcode(std::string_view spelling);
int OpcodeArity(Opcode op);  // -1: variadic
bool IsElementwise(Opcode op);
bool IsTranscendental(Opcode op);
bool IsCommutative(Opcode op);
// Parameter, tuple, get-tuple-element, while, conditional, call, custom call: no elemental
// form, so never folded, fused or emitted per element.
bool IsStructural(Opcode op);
// Opcodes that only move, select or convert element bits (and structural ones): on f16 and
// bf16 they stay 16-bit. Every other opcode with a 16-bit float operand or result computes,
// and the low-precision pass rewrites it to compute in f32 (passes/low_precision.h).
bool MovesBitsOnly(Opcode op);

enum class ComparisonDirection : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
std::string_view ComparisonDirectionName(ComparisonDirection d);  // "EQ", ...
std::optional<ComparisonDirection> ParseComparisonDirection(std::string_view s);

// Fusion kinds as in XLA: loop (one thread per output element), input (a reduction is the
// hero), output (a dot with fused consumers).
// kWholeLoop: a counted loop as one kernel (whole-loop fusion); see WholeLoopLayout.
enum class FusionKind : uint8_t { kLoop, kInput, kOutput, kWholeLoop, kScatter };
std::string_view FusionKindName(FusionKind k);  // "kLoop", ...
std::optional<FusionKind> ParseFusionKind(std::string_view s);

}  // namespace fj
