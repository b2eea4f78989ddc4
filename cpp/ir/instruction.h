// Instruction: one node of the HLO-like graph. An instruction has an opcode, a shape, its
// operands and users (kept consistent by the graph edits below), the attributes its opcode
// uses, and the computations it calls (reduction combiners, loop bodies, fused kernels).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/literal.h"
#include "ir/opcode.h"
#include "ir/shape.h"

namespace fj {

class Computation;

// How printing writes a constant's value (ToString's default: every element).
using LiteralText = std::function<std::string(const std::shared_ptr<const Literal>&)>;

struct SliceConfig {
  std::vector<int64_t> starts, limits, strides;
  bool operator==(const SliceConfig& o) const {
    return starts == o.starts && limits == o.limits && strides == o.strides;
  }
};

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contracting, rhs_contracting;
  bool operator==(const DotDims& o) const {
    return lhs_batch == o.lhs_batch && rhs_batch == o.rhs_batch &&
           lhs_contracting == o.lhs_contracting && rhs_contracting == o.rhs_contracting;
  }
};

// XLA's GatherDimensionNumbers. slice_sizes live in InstructionAttrs::dimensions.
struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
  int64_t index_vector_dim = 0;
  bool operator==(const GatherDims& o) const {
    return offset_dims == o.offset_dims && collapsed_slice_dims == o.collapsed_slice_dims &&
           start_index_map == o.start_index_map && index_vector_dim == o.index_vector_dim;
  }
};

// XLA's ScatterDimensionNumbers, and its scatter's two promises about the indices.
// `unique_indices`: no two updates land on the same element, so they may be applied in any
// order (codegen then applies them in parallel); broken, the result is unspecified, as in
// XLA. `indices_are_sorted` is kept for the printed IR and unused.
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  bool indices_are_sorted = false;
  bool unique_indices = false;
  bool operator==(const ScatterDims& o) const {
    return update_window_dims == o.update_window_dims && inserted_window_dims == o.inserted_window_dims &&
           scatter_dims_to_operand_dims == o.scatter_dims_to_operand_dims && index_vector_dim == o.index_vector_dim &&
           indices_are_sorted == o.indices_are_sorted && unique_indices == o.unique_indices;
  }
};

struct PadDim {
  int64_t low = 0, high = 0, interior = 0;
  bool operator==(const PadDim& o) const {
    return low == o.low && high == o.high && interior == o.interior;
  }
};

// The attributes an opcode uses; the others keep their defaults. Which opcode reads which
// field is documented in the printer (ir/printer.cc) and checked by the verifier.
struct InstructionAttrs {
  // broadcast/transpose/reverse/reduce/argmax: dimensions; concatenate: {dim};
  // iota: {iota_dimension}; dynamic-slice and gather: the slice sizes.
  std::vector<int64_t> dimensions;
  SliceConfig slice;
  DotDims dot;
  GatherDims gather;
  ScatterDims scatter;
  std::vector<PadDim> padding;
  ComparisonDirection direction = ComparisonDirection::kEq;
  int64_t index = 0;  // parameter number; get-tuple-element index
  FusionKind fusion_kind = FusionKind::kLoop;
  std::string custom_call_target;
  std::string custom_call_config;  // opaque configuration of a custom call
  std::shared_ptr<const Literal> literal;  // constant
  // while: the unroll factor the user asked for (0: none given; the compiler may choose),
  // and the known number of iterations (-1: unknown; set by the trip-count pass).
  int64_t unroll = 0;
  int64_t trip_count = -1;

  // Equality of everything but metadata (used by CSE).
  bool operator==(const InstructionAttrs& o) const;
};

class Instruction {
 public:
  // Creates a detached instruction; Computation::AddInstruction gives it a name, an id and
  // a parent, and registers it as a user of its operands.
  static std::unique_ptr<Instruction> Create(Opcode opcode, Shape shape,
                                             std::vector<Instruction*> operands,
                                             InstructionAttrs attrs = {},
                                             std::vector<Computation*> called = {});
  // Same opcode, attributes and called computations, new shape and operands.
  std::unique_ptr<Instruction> CloneWithNewOperands(const Shape& shape,
                                                    std::vector<Instruction*> operands) const;

  Opcode opcode() const { return opcode_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return shape_.dtype(); }
  const std::string& name() const { return name_; }
  int64_t unique_id() const { return id_; }
  Computation* parent() const { return parent_; }

  int operand_count() const { return static_cast<int>(operands_.size()); }
  Instruction* operand(int i) const { return operands_[i]; }
  const std::vector<Instruction*>& operands() const { return operands_; }
  // Each user appears once, even if it uses this instruction several times.
  const std::vector<Instruction*>& users() const { return users_; }
  int user_count() const { return static_cast<int>(users_.size()); }
  bool IsRoot() const;

  const InstructionAttrs& attrs() const { return attrs_; }
  InstructionAttrs& mutable_attrs() { return attrs_; }
  const std::vector<int64_t>& dimensions() const { return attrs_.dimensions; }
  const Literal& literal() const { return *attrs_.literal; }
  int64_t parameter_number() const { return attrs_.index; }
  int64_t tuple_index() const { return attrs_.index; }
  ComparisonDirection direction() const { return attrs_.direction; }
  FusionKind fusion_kind() const { return attrs_.fusion_kind; }
  const std::string& metadata() const { return metadata_; }
  void set_metadata(std::string m) { metadata_ = std::move(m); }

  const std::vector<Computation*>& called_computations() const { return called_; }
  Computation* to_apply() const;            // reduce, call
  Computation* fused_computation() const;   // fusion
  Computation* while_condition() const;     // while
  Computation* while_body() const;          // while
  void set_called_computation(int i, Computation* c) { called_[i] = c; }
  void set_called_computations(std::vector<Computation*> c) { called_ = std::move(c); }

  // Graph edits; users lists stay consistent.
  void ReplaceOperandWith(int i, Instruction* new_operand);
  // Every use of this instruction (and its place as root) moves to `replacement`.
  void ReplaceAllUsesWith(Instruction* replacement);
  void AppendOperand(Instruction* operand);
  void RemoveOperand(int i);  // later operands move down one slot
  void DropAllOperands();  // before deleting an instruction

  // Same opcode, shape, attributes and called computations (not operands or names).
  bool IdenticalIgnoringOperands(const Instruction& other) const;

  // "%add.3 = f32[4] add(%a, %b), dimensions={0}"
  // `literal_text`, if given, prints a constant's value (default: every element).
  std::string ToString(const LiteralText* literal_text = nullptr) const;
  std::string OperandsToString() const;
  std::string AttributesToString() const;  // ", k=v, ..." or ""
  // The same with each called computation written as `called` gives it, and without
  // the source location when `metadata` is false.
  std::string AttributesToString(const std::function<std::string(const Computation*)>& called,
                                 bool metadata) const;

 private:
  friend class Computation;
  Instruction() = default;
  void AddUser(Instruction* user);
  void RemoveUser(Instruction* user);

  Opcode opcode_ = Opcode::kParameter;
  Shape shape_;
  std::string name_;
  int64_t id_ = -1;
  Computation* parent_ = nullptr;
  std::vector<Instruction*> operands_;
  std::vector<Instruction*> users_;
  std::vector<Computation*> called_;
  InstructionAttrs attrs_;
  std::string metadata_;
};

// Custom calls whose target starts with this call the host (runtime/host_callback.h).
inline constexpr const char* kHostCallbackPrefix = "host_callback.";

// Whether running `instr` does something besides computing its value: a host callback
// (debug.print), or a loop, conditional or call whose computations run one. The passes keep
// such an instruction even when nothing reads its value, and do not duplicate it.
bool HasSideEffects(const Instruction* instr);

}  // namespace fj
