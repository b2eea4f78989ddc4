// The text form of the IR, HLO-like. It round-trips through parser.cc:
//
//   module jit_f
//
//   %add_f32 (lhs: f32[], rhs: f32[]) -> f32[] {
//     %lhs = f32[] parameter(0)
//     %rhs = f32[] parameter(1)
//     ROOT %add = f32[] add(%lhs, %rhs)
//   }
//
//   ENTRY %main (x: f32[4,3]) -> (f32[4]) {
//     %x = f32[4,3] parameter(0)
//     %zero = f32[] constant(0)
//     %sum = f32[4] reduce(%x, %zero), dimensions={1}, to_apply=%add_f32
//     ROOT %out = (f32[4]) tuple(%sum)
//   }
//
// Attributes by opcode: iota: iota_dimension; broadcast, transpose, reverse, reduce,
// argmax, argmin: dimensions; concatenate: dimensions={d}; slice: slice={[b:e:s], ...};
// dynamic-slice: dynamic_slice_sizes; pad: padding=lo_hi_in x ...; compare: direction;
// get-tuple-element: index; dot: lhs/rhs batch and contracting dims; fusion: kind, calls;
// reduce and call: to_apply; while: condition, body (and unroll, the factor the user asked
// for); conditional: branch_computations;
// custom-call: custom_call_target, custom_call_config. Any instruction: source="file:line".
#include <sstream>
#include <unordered_map>

#include "ir/module.h"

namespace fj {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string Instruction::OperandsToString() const {
  std::string s;
  for (int i = 0; i < operand_count(); ++i) {
    if (i) s += ", ";
    s += "%" + operand(i)->name();
  }
  return s;
}

std::string Instruction::AttributesToString() const {
  return AttributesToString([](const Computation* c) { return "%" + c->name(); }, /*metadata=*/true);
}

std::string Instruction::AttributesToString(const std::function<std::string(const Computation*)>& called,
                                            bool metadata) const {
  std::ostringstream os;
  const InstructionAttrs& a = attrs_;
  switch (opcode_) {
    case Opcode::kIota:
      os << ", iota_dimension=" << a.dimensions.at(0);
      break;
    case Opcode::kBroadcast:
    case Opcode::kTranspose:
    case Opcode::kReverse:
    case Opcode::kArgMax:
    case Opcode::kArgMin:
    case Opcode::kConcatenate:
      os << ", dimensions=" << DimsToString(a.dimensions);
      break;
    case Opcode::kReduce:
      os << ", dimensions=" << DimsToString(a.dimensions) << ", to_apply=" << called(called_.at(0));
      break;
    case Opcode::kCall:
      os << ", to_apply=" << called(called_.at(0));
      break;
    case Opcode::kSlice: {
      os << ", slice={";
      for (size_t i = 0; i < a.slice.starts.size(); ++i) {
        if (i) os << ", ";
        os << "[" << a.slice.starts[i] << ":" << a.slice.limits[i] << ":" << a.slice.strides[i]
           << "]";
      }
      os << "}";
      break;
    }
    case Opcode::kDynamicSlice:
      os << ", dynamic_slice_sizes=" << DimsToString(a.dimensions);
      break;
    case Opcode::kScatter:
      os << ", update_window_dims=" << DimsToString(a.scatter.update_window_dims)
         << ", inserted_window_dims=" << DimsToString(a.scatter.inserted_window_dims)
         << ", scatter_dims_to_operand_dims=" << DimsToString(a.scatter.scatter_dims_to_operand_dims)
         << ", index_vector_dim=" << a.scatter.index_vector_dim;
      if (a.scatter.indices_are_sorted) os << ", indices_are_sorted=true";
      if (a.scatter.unique_indices) os << ", unique_indices=true";
      os << ", to_apply=" << called(called_.at(0));
      break;
    case Opcode::kGather:
      os << ", offset_dims=" << DimsToString(a.gather.offset_dims)
         << ", collapsed_slice_dims=" << DimsToString(a.gather.collapsed_slice_dims)
         << ", start_index_map=" << DimsToString(a.gather.start_index_map)
         << ", index_vector_dim=" << a.gather.index_vector_dim << ", slice_sizes=" << DimsToString(a.dimensions);
      break;
    case Opcode::kPad: {
      os << ", padding=";
      for (size_t i = 0; i < a.padding.size(); ++i) {
        if (i) os << "x";
        os << a.padding[i].low << "_" << a.padding[i].high << "_" << a.padding[i].interior;
      }
      if (a.padding.empty()) os << "{}";
      break;
    }
    case Opcode::kCompare:
      os << ", direction=" << ComparisonDirectionName(a.direction);
      break;
    case Opcode::kGetTupleElement:
      os << ", index=" << a.index;
      break;
    case Opcode::kDot:
      os << ", lhs_batch_dims=" << DimsToString(a.dot.lhs_batch)
         << ", lhs_contracting_dims=" << DimsToString(a.dot.lhs_contracting)
         << ", rhs_batch_dims=" << DimsToString(a.dot.rhs_batch)
         << ", rhs_contracting_dims=" << DimsToString(a.dot.rhs_contracting);
      break;
    case Opcode::kFusion:
      os << ", kind=" << FusionKindName(a.fusion_kind) << ", calls=" << called(called_.at(0));
      if (a.fusion_kind == FusionKind::kWholeLoop) {
        os << ", trip_count=" << a.trip_count << ", index=" << a.index << ", dimensions=" << DimsToString(a.dimensions);
      }
      break;
    case Opcode::kWhile:
      os << ", condition=" << called(called_.at(0)) << ", body=" << called(called_.at(1));
      if (a.unroll != 0) os << ", unroll=" << a.unroll;
      if (a.trip_count >= 0) os << ", trip_count=" << a.trip_count;
      break;
    case Opcode::kConditional:
      os << ", branch_computations={";
      for (size_t i = 0; i < called_.size(); ++i) os << (i ? ", " : "") << called(called_[i]);
      os << "}";
      break;
    case Opcode::kCustomCall:
      os << ", custom_call_target=" << Quote(a.custom_call_target);
      if (!a.custom_call_config.empty()) os << ", custom_call_config=" << Quote(a.custom_call_config);
      break;
    default:
      break;
  }
  if (metadata && !metadata_.empty()) os << ", source=" << Quote(metadata_);
  return os.str();
}

std::string Instruction::ToString(const LiteralText* literal_text) const {
  std::string s = "%" + name_ + " = " + shape_.ToString() + " " + std::string(OpcodeName(opcode_));
  if (opcode_ == Opcode::kParameter) {
    s += "(" + std::to_string(attrs_.index) + ")";
  } else if (opcode_ == Opcode::kConstant) {
    s += "(" + (literal_text ? (*literal_text)(attrs_.literal) : attrs_.literal->ToString()) + ")";
  } else {
    s += "(" + OperandsToString() + ")";
  }
  return s + AttributesToString();
}

std::string Computation::ToString(bool is_entry, const LiteralText* literal_text) const {
  std::string s = is_entry ? "ENTRY %" : "%";
  s += name_ + " (";
  for (int i = 0; i < num_parameters(); ++i) {
    if (i) s += ", ";
    s += parameters_[i] ? parameters_[i]->name() + ": " + parameters_[i]->shape().ToString()
                        : std::string("?");
  }
  s += ") -> " + (root_ ? root_->shape().ToString() : std::string("?")) + " {\n";
  for (Instruction* instr : MakePostOrder()) {
    s += instr == root_ ? "  ROOT " : "  ";
    s += instr->ToString(literal_text) + "\n";
  }
  return s + "}\n";
}

std::string Computation::StructuralText() const {
  std::unordered_map<const Instruction*, size_t> position;
  auto called = [](const Computation* c) { return "{\n" + c->StructuralText() + "}"; };
  std::string s = "(";
  for (int i = 0; i < num_parameters(); ++i) s += (i ? ", " : "") + parameters_[i]->shape().ToString();
  s += ")\n";
  for (Instruction* instr : MakePostOrder()) {
    position.emplace(instr, position.size());
    s += (instr == root_ ? "ROOT " : "") + instr->shape().ToString() + " " + std::string(OpcodeName(instr->opcode())) + "(";
    if (instr->opcode() == Opcode::kParameter) {
      s += std::to_string(instr->parameter_number());
    } else if (instr->opcode() == Opcode::kConstant) {
      const std::shared_ptr<const Literal>& literal = instr->attrs().literal;
      if (literal->byte_size() <= 256) {  // the bits (NaN payloads and -0 included)
        static const char kHex[] = "0123456789abcdef";
        const auto* bytes = static_cast<const unsigned char*>(literal->data());
        for (int64_t i = 0; i < literal->byte_size(); ++i) {
          s += kHex[bytes[i] >> 4];
          s += kHex[bytes[i] & 15];
        }
      } else {
        std::ostringstream address;
        address << "literal@" << static_cast<const void*>(literal.get());
        s += address.str();
      }
    } else {
      for (int i = 0; i < instr->operand_count(); ++i) s += (i ? "," : "") + std::to_string(position.at(instr->operand(i)));
    }
    s += ")" + instr->AttributesToString(called, /*metadata=*/false) + "\n";
  }
  return s;
}

std::string Module::ToString(const LiteralText* literal_text) const {
  std::string s = "module " + name_;
  if (!donated_.empty()) s += ", donated=" + DimsToString(donated_);
  s += "\n";
  for (Computation* c : MakeComputationPostOrder()) {
    s += "\n" + c->ToString(c == entry_, literal_text);
  }
  return s;
}

}  // namespace fj
