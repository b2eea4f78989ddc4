// Opcode properties from opcodes.def.
#include "ir/opcode.h"

#include <cstdint>

namespace fj {
namespace {

constexpr int kE = 1, kT = 2, kC = 4, kS = 8;

struct OpcodeInfo {
  std::string_view spelling;
  int arity;
  int flags;
};

constexpr OpcodeInfo kOpcodeInfo[] = {
#define FJ_OPCODE(name, spelling, arity, flags) {spelling, arity, flags},
#include "ir/opcodes.def"
#undef FJ_OPCODE
};

const OpcodeInfo& Info(Opcode op) { return kOpcodeInfo[static_cast<int>(op)]; }

}  // namespace

std::string_view OpcodeName(Opcode op) { return Info(op).spelling; }

std::optional<Opcode> ParseOpcode(std::string_view spelling) {
  for (size_t i = 0; i < sizeof(kOpcodeInfo) / sizeof(kOpcodeInfo[0]); ++i) {
    if (kOpcodeInfo[i].spelling == spelling) return static_cast<Opcode>(i);
  }
  return std::nullopt;
}

int OpcodeArity(Opcode op) { return Info(op).arity; }
bool IsElementwise(Opcode op) { return Info(op).flags & kE; }
bool IsTranscendental(Opcode op) { return Info(op).flags & kT; }
bool IsCommutative(Opcode op) { return Info(op).flags & kC; }
bool IsStructural(Opcode op) { return Info(op).flags & kS; }

bool MovesBitsOnly(Opcode op) {
  switch (op) {
    case Opcode::kConstant: case Opcode::kConvert: case Opcode::kBitcastConvert: case Opcode::kCopy:
    case Opcode::kSelect: case Opcode::kBroadcast: case Opcode::kReshape: case Opcode::kTranspose:
    case Opcode::kSlice: case Opcode::kDynamicSlice: case Opcode::kDynamicUpdateSlice:
    case Opcode::kConcatenate: case Opcode::kPad: case Opcode::kReverse: case Opcode::kFusion:
      return true;
    default:
      return IsStructural(op);
  }
}

std::string_view ComparisonDirectionName(ComparisonDirection d) {
  static constexpr std::string_view kNames[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  return kNames[static_cast<int>(d)];
}

std::optional<ComparisonDirection> ParseComparisonDirection(std::string_view s) {
  for (int i = 0; i < 6; ++i) {
    auto d = static_cast<ComparisonDirection>(i);
    if (ComparisonDirectionName(d) == s) return d;
  }
  return std::nullopt;
}

std::string_view FusionKindName(FusionKind k) {
  switch (k) {
    case FusionKind::kLoop: return "kLoop";
    case FusionKind::kInput: return "kInput";
    case FusionKind::kOutput: return "kOutput";
    case FusionKind::kWholeLoop: return "kWholeLoop";
    case FusionKind::kScatter: return "kScatter";
  }
  return "?";
}

std::optional<FusionKind> ParseFusionKind(std::string_view s) {
  for (FusionKind k : {FusionKind::kLoop, FusionKind::kInput, FusionKind::kOutput, FusionKind::kWholeLoop,
                       FusionKind::kScatter}) {
    if (FusionKindName(k) == s) return k;
  }
  return std::nullopt;
}

}  // namespace fj
