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

std::string ComputationList(const std::vector<Computation*>& cs) {
  std::string s = "{";
  for (size_t i = 0; i < cs.size(); ++i) {
    if (i) s += ", ";
    s += "%" + cs[i]->name();
  }
  return s + "}";
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
      os << ", dimensions=" << DimsToString(a.dimensions) << ", to_apply=%"
         << called_.at(0)->name();
      break;
    case Opcode::kCall:
      os << ", to_apply=%" << called_.at(0)->name();
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
      os << ", to_apply=%" << called_.at(0)->name();
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
      os << ", kind=" << FusionKindName(a.fusion_kind) << ", calls=%" << called_.at(0)->name();
      if (a.fusion_kind == FusionKind::kWholeLoop) {
        os << ", trip_count=" << a.trip_count << ", index=" << a.index << ", dimensions=" << DimsToString(a.dimensions);
      }
      break;
    case Opcode::kWhile:
      os << ", condition=%" << called_.at(0)->name() << ", body=%" << called_.at(1)->name();
      if (a.unroll != 0) os << ", unroll=" << a.unroll;
      if (a.trip_count >= 0) os << ", trip_count=" << a.trip_count;
      break;
    case Opcode::kConditional:
      os << ", branch_computations=" << ComputationList(called_);
      break;
    case Opcode::kCustomCall:
      os << ", custom_call_target=" << Quote(a.custom_call_target);
      if (!a.custom_call_config.empty()) os << ", custom_call_config=" << Quote(a.custom_call_config);
      break;
    default:
      break;
  }
  if (!metadata_.empty()) os << ", source=" << Quote(metadata_);
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

std::string Module::ToString(const LiteralText* literal_text) const {
  std::string s = "module " + name_ + "\n";
  for (Computation* c : MakeComputationPostOrder()) {
    s += "\n" + c->ToString(c == entry_, literal_text);
  }
  return s;
}

}  // namespace fj
