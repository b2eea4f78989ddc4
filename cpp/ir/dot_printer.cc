// DOT printer (see dot_printer.h).
#include "ir/dot_printer.h"

#include <sstream>

namespace fj {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string NodeId(const Instruction* i) { return "n" + std::to_string(i->unique_id()); }

std::string Label(const Instruction* i) {
  std::string op(OpcodeName(i->opcode()));
  if (i->opcode() == Opcode::kConstant && i->shape().IsScalar()) op += " " + i->literal().ToString();
  if (i->opcode() == Opcode::kParameter) op += " " + std::to_string(i->parameter_number());
  return Escape("%" + i->name() + "\\n" + op + "\\n" + i->shape().ToString());
}

const char* Colour(const Instruction* i) {
  switch (i->opcode()) {
    case Opcode::kParameter: return "#fff3c4";
    case Opcode::kConstant: return "#eeeeee";
    case Opcode::kReduce: case Opcode::kArgMax: case Opcode::kArgMin: return "#c9e4ff";
    case Opcode::kDot: return "#ffd0d0";
    case Opcode::kCustomCall: return "#ffb0b0";
    case Opcode::kConcatenate: case Opcode::kSlice: case Opcode::kBroadcast:
    case Opcode::kReshape: case Opcode::kTranspose: return "#e0f0d0";
    default: return "white";
  }
}

void EmitComputation(std::ostringstream& os, const Computation& c, int depth);

void EmitInstruction(std::ostringstream& os, const Instruction* i, int depth) {
  std::string indent(2 * depth, ' ');
  if (i->opcode() == Opcode::kFusion) {
    const Computation* f = i->fused_computation();
    os << indent << "subgraph cluster_" << NodeId(i) << " {\n"
       << indent << "  label=\"" << Escape("%" + i->name() + " (" +
                                            std::string(FusionKindName(i->fusion_kind())) + ")")
       << "\"; style=\"rounded,filled\"; fillcolor=\"#f4f0ff\";\n";
    EmitComputation(os, *f, depth + 1);
    os << indent << "}\n";
    return;
  }
  os << indent << NodeId(i) << " [label=\"" << Label(i) << "\", shape=box, style=filled, fillcolor=\""
     << Colour(i) << "\"];\n";
}

// The node that stands for an instruction's value: a fusion's value is its fused root.
const Instruction* ValueNode(const Instruction* i) {
  while (i->opcode() == Opcode::kFusion) i = i->fused_computation()->root();
  return i;
}

// A fused parameter bound to an operand of its fusion (a whole-loop step's counter is not).
bool IsBoundParameter(const Computation& c, const Instruction* i) {
  return c.IsFusionComputation() && i->opcode() == Opcode::kParameter &&
         i->parameter_number() < c.fusion_instruction()->operand_count();
}

void EmitComputation(std::ostringstream& os, const Computation& c, int depth) {
  std::string indent(2 * depth, ' ');
  for (const Instruction* i : c.MakePostOrder()) {
    // A fused parameter is drawn as an edge from the fusion's operand instead.
    if (IsBoundParameter(c, i)) continue;
    EmitInstruction(os, i, depth);
  }
  for (const Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion) continue;  // edges come from the fused body
    if (IsBoundParameter(c, i)) continue;
    for (const Instruction* op : i->operands()) {
      const Instruction* src = op;
      if (IsBoundParameter(c, op)) {
        src = c.fusion_instruction()->operand(op->parameter_number());
      }
      os << indent << NodeId(ValueNode(src)) << " -> " << NodeId(i) << ";\n";
    }
  }
}

}  // namespace

std::string ModuleToDot(const Module& module) {
  std::ostringstream os;
  os << "digraph \"" << Escape(module.name()) << "\" {\n"
     << "  rankdir=TB; node [fontname=\"monospace\", fontsize=10];\n";
  EmitComputation(os, *module.entry(), 1);
  os << "}\n";
  return os.str();
}

}  // namespace fj
