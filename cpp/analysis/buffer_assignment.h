// Buffer assignment for a kernelized module: every array value gets a slice of a parameter,
// a constant, an output buffer, or the temporary arena. Temporaries are reused by liveness
// along each computation's schedule (post order). Reshapes and get-tuple-elements alias
// their operand; outputs that cannot be written in place (a parameter returned as is, the
// same value returned twice) are copied at the end.
//
// Control flow: a while loop's state gets one buffer per element, live across the loop.
// Its condition and body read the state in place; a body kernel whose value becomes state
// element i writes it straight into that element's buffer where no later read of the old
// value forbids it, else the value is copied there at the end of the iteration. A
// conditional's outputs get buffers that each branch writes (in place, or by a copy). The
// temporaries of loop bodies, conditions and branches share the arena, disjoint from what
// is live around them. A dynamic-update-slice kernel updates its operand's buffer in place
// where that operand is dead after it.
//
// Donation (Module::donated_parameters, jit's donate_argnums): an output of a donated
// parameter's shape may take over its buffer where the program allows it (see
// OutputAlias): the update of that parameter (written in place), the loop that carries it
// as state (updated in place, no copy in or out), the parameter returned as is, or a kernel
// that writes after the parameter's last read.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/module.h"

namespace fj {

enum class BufferKind { kParameter, kConstant, kOutput, kTemp };

struct BufferSlice {
  BufferKind kind = BufferKind::kTemp;
  int64_t index = 0;   // parameter number / output number
  int64_t offset = 0;  // byte offset in the temp arena
  int64_t size = 0;    // bytes
  const Instruction* constant = nullptr;  // kConstant
  bool operator==(const BufferSlice& o) const {
    return kind == o.kind && index == o.index && offset == o.offset && constant == o.constant;
  }
};

// A copy of `source` into `target` (both `source.size` bytes).
struct BufferCopy {
  BufferSlice target;
  BufferSlice source;
};

class BufferAssignment {
 public:
  // The module must be kernelized: its control-flow computations hold only parameters,
  // constants, fusions, custom calls, reshapes, tuples, get-tuple-elements, whiles and
  // conditionals.
  explicit BufferAssignment(const Module& module);

  // The slice holding an instruction's value (tuple_index for multi-output kernels,
  // loops and conditionals).
  const BufferSlice& Get(const Instruction* instr, int64_t tuple_index = 0) const;
  int64_t temp_bytes() const { return temp_bytes_; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  const Shape& output_shape(int i) const { return outputs_[i]->shape(); }

  // Copies into the program's output buffers after everything ran.
  const std::vector<BufferCopy>& output_copies() const { return output_copies_; }
  // Per output: the donated parameter whose buffer it may take (runtime/executable.h).
  const std::vector<OutputAlias>& output_aliases() const { return aliases_; }
  // The instructions of a control-flow computation in execution order.
  const std::vector<const Instruction*>& schedule(const Computation* c) const { return schedules_.at(c); }
  const std::vector<const Instruction*>& schedule() const { return schedule(entry_); }

  // What a while loop or a conditional needs around its computations.
  struct LoopPlan {
    std::vector<BufferCopy> before;        // the initial state into the state buffers
    std::vector<BufferCopy> after_body;    // results not written in place, each iteration
    int64_t counter_offset = 0;            // an arena slot counting iterations (launch counts)
  };
  const LoopPlan& loop(const Instruction* while_instr) const { return loops_.at(while_instr); }
  // Copies at the end of branch b of a conditional (results not written in place).
  const std::vector<BufferCopy>& branch_copies(const Instruction* conditional, int b) const {
    return branches_.at(conditional).at(b);
  }
  // Whether kernel `instr` writes its output into the buffer of one of its operands (an
  // in-place dynamic-update-slice, or a loop state element updated where it is read).
  bool WritesInPlace(const Instruction* instr) const { return in_place_.count(instr) != 0; }

  std::string ToString() const;

 private:
  using Value = std::pair<const Instruction*, int64_t>;
  struct ValueHash {
    size_t operator()(const Value& v) const {
      return std::hash<const void*>()(v.first) * 31 + static_cast<size_t>(v.second);
    }
  };
  class Arena;

  // The instruction and tuple index that define the buffer `instr` (an alias) reads.
  Value Resolve(const Instruction* instr, int64_t index = 0) const;
  // Assigns the temporaries of control-flow computation `c` (recursively), `fixed` holding
  // values whose buffers were chosen before (loop state written in place).
  void Assign(const Computation& c, Arena& arena);
  std::vector<const Instruction*> Schedule(const Computation& c, const Instruction* loop) const;
  // Post order, each writer (that overwrites the buffers of the values it maps to) placed
  // after the other readers of those values where it can be: as late as it can go.
  using Readers = std::unordered_map<Value, std::unordered_set<const Instruction*>, ValueHash>;
  std::vector<const Instruction*> ScheduleWritersLast(
      const Computation& c, const std::unordered_map<const Instruction*, std::vector<Value>>& replaces,
      Readers readers) const;
  // The outputs that take over donated parameters' buffers (aliases_, and the entry's
  // schedule that lets them).
  void AliasDonatedParameters(const Module& module);
  void AssignLoop(const Instruction* loop, Arena& arena);
  void AssignConditional(const Instruction* cond, Arena& arena);
  BufferSlice NewTemp(Arena& arena, int64_t bytes);
  // Outputs that an in-place update writes: their operand's kernel writes the output buffer.
  void ComputeUpdatedOutputsInPlace();
  // Whether an operand of `kernel` other than `slot` reads `value`'s buffer (an update
  // from the buffer being updated: then not in place).
  bool ReadsElsewhere(const Instruction* kernel, int slot, Value value) const;

  const Computation* entry_ = nullptr;
  std::unordered_map<const Computation*, std::vector<const Instruction*>> schedules_;
  // For the parameter of each loop condition and body: its loop; of each branch: its
  // conditional and branch number.
  std::unordered_map<const Instruction*, std::pair<const Instruction*, int>> param_owner_;
  std::vector<const Instruction*> outputs_;
  std::unordered_map<Value, BufferSlice, ValueHash> slices_;
  std::vector<BufferCopy> output_copies_;
  std::vector<OutputAlias> aliases_;
  std::unordered_map<const Instruction*, LoopPlan> loops_;
  std::unordered_map<const Instruction*, std::vector<std::vector<BufferCopy>>> branches_;
  std::unordered_map<const Instruction*, int> in_place_;
  int64_t temp_bytes_ = 0;
  int64_t next_counter_ = 0;  // the next loop's iteration counter (AssignLoop)
};

// The operand a kernel may update in place: the operand 0 of a dynamic-update-slice root
// (or of the first of a chain of them, each updating the one before: an unrolled scan's
// rows, one per step) that nothing else in the kernel reads, or -1.
int InPlaceUpdateOperand(const Instruction* kernel);
// The same for a kernel's fused computation: the parameter number, or -1.
int InPlaceUpdateParameter(const Computation& fused);
// Such a kernel's dynamic-update-slices, in the order they apply (the root last); empty
// where the kernel updates nothing in place.
std::vector<const Instruction*> InPlaceUpdates(const Computation& fused);

// The bytes a kernel moves: its operands read, its output written. An update in place
// (`in_place`: its output shares the buffer of its InPlaceUpdateOperand) reads and writes
// its update, not the buffer it lands in.
struct KernelTraffic {
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};
KernelTraffic KernelBytes(const Instruction* kernel, bool in_place);

// Whether kernel `kernel` reads operand `slot` only at the positions of the elements it
// writes to its output `output` (elementwise paths, reshapes of equal size), so that the
// output may share the operand's buffer. An in-place update's operand qualifies too.
bool ReadsOnlyAtOwnPositions(const Instruction* kernel, int slot, int output);

}  // namespace fj
