// Buffer assignment for a kernelized computation: every array value gets a slice of a
// parameter, a constant, an output buffer, or the temporary arena. Temporaries are reused
// by liveness along the schedule (post order). Reshapes and get-tuple-elements alias their
// operand; outputs that cannot be written in place (a parameter returned as is, the same
// value returned twice) are copied at the end.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/computation.h"

namespace fj {

enum class BufferKind { kParameter, kConstant, kOutput, kTemp };

struct BufferSlice {
  BufferKind kind = BufferKind::kTemp;
  int64_t index = 0;   // parameter number / output number
  int64_t offset = 0;  // byte offset in the temp arena
  int64_t size = 0;    // bytes
  const Instruction* constant = nullptr;  // kConstant
};

class BufferAssignment {
 public:
  // `entry` must be kernelized: only parameters, constants, fusions, custom calls,
  // reshapes, tuples and get-tuple-elements.
  explicit BufferAssignment(const Computation& entry);

  // The slice holding an instruction's value (tuple_index for multi-output fusions).
  const BufferSlice& Get(const Instruction* instr, int64_t tuple_index = 0) const;
  int64_t temp_bytes() const { return temp_bytes_; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  const Shape& output_shape(int i) const { return outputs_[i]->shape(); }

  struct OutputCopy {
    int output;
    BufferSlice source;
  };
  // Copies into output buffers after all kernels ran.
  const std::vector<OutputCopy>& output_copies() const { return copies_; }
  // Instructions in execution order.
  const std::vector<const Instruction*>& schedule() const { return schedule_; }
  std::string ToString() const;

 private:
  using Value = std::pair<const Instruction*, int64_t>;
  struct ValueHash {
    size_t operator()(const Value& v) const {
      return std::hash<const void*>()(v.first) * 31 + static_cast<size_t>(v.second);
    }
  };
  // The instruction and tuple index that define the buffer `instr` (an alias) reads.
  Value Resolve(const Instruction* instr) const;

  std::vector<const Instruction*> schedule_;
  std::vector<const Instruction*> outputs_;
  std::unordered_map<Value, BufferSlice, ValueHash> slices_;
  std::vector<OutputCopy> copies_;
  int64_t temp_bytes_ = 0;
};

}  // namespace fj
