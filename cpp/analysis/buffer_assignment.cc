// Buffer assignment (see buffer_assignment.h).
#include "analysis/buffer_assignment.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "support/error.h"

namespace fj {
namespace {

constexpr int64_t kAlignment = 64;

int64_t AlignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// First-fit allocator over the temp arena, with coalescing of freed blocks.
class ArenaAllocator {
 public:
  int64_t Allocate(int64_t size) {
    size = AlignUp(std::max<int64_t>(size, 1));
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= size) {
        int64_t offset = it->first;
        int64_t rest = it->second - size;
        free_.erase(it);
        if (rest > 0) free_[offset + size] = rest;
        return offset;
      }
    }
    int64_t offset = end_;
    end_ += size;
    return offset;
  }
  void Free(int64_t offset, int64_t size) {
    size = AlignUp(std::max<int64_t>(size, 1));
    auto it = free_.emplace(offset, size).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t end() const { return end_; }

 private:
  std::map<int64_t, int64_t> free_;
  int64_t end_ = 0;
};

}  // namespace

namespace {
// Instructions that run as a kernel and write their own output buffers.
bool IsKernelInstruction(const Instruction* i) {
  return i->opcode() == Opcode::kFusion || i->opcode() == Opcode::kCustomCall;
}
}  // namespace

BufferAssignment::Value BufferAssignment::Resolve(const Instruction* instr) const {
  int64_t index = 0;
  while (true) {
    if (instr->opcode() == Opcode::kReshape) {
      instr = instr->operand(0);
    } else if (instr->opcode() == Opcode::kGetTupleElement) {
      index = instr->tuple_index();
      instr = instr->operand(0);
      if (instr->opcode() == Opcode::kTuple) {
        instr = instr->operand(index);
        index = 0;
      }
    } else {
      return {instr, index};
    }
  }
}

BufferAssignment::BufferAssignment(const Computation& entry) {
  for (Instruction* i : entry.MakePostOrder()) schedule_.push_back(i);
  const Instruction* root = entry.root();
  if (root->opcode() == Opcode::kTuple) {
    for (const Instruction* op : root->operands()) outputs_.push_back(op);
  } else {
    outputs_.push_back(root);
  }
  for (const Instruction* out : outputs_) {
    if (!out->shape().IsArray()) ThrowUnimplemented("nested tuples in program outputs");
  }

  // Parameters and constants.
  for (const Instruction* i : schedule_) {
    if (i->opcode() == Opcode::kParameter) {
      slices_[{i, 0}] = {BufferKind::kParameter, i->parameter_number(), 0, i->shape().ByteSize()};
    } else if (i->opcode() == Opcode::kConstant) {
      BufferSlice s{BufferKind::kConstant, 0, 0, i->shape().ByteSize()};
      s.constant = i;
      slices_[{i, 0}] = s;
    }
  }

  // Outputs written in place by the kernel that computes them.
  std::vector<Value> pending_copies;
  for (size_t k = 0; k < outputs_.size(); ++k) {
    Value v = Resolve(outputs_[k]);
    bool is_kernel = IsKernelInstruction(v.first);
    if (is_kernel && !slices_.count(v)) {
      const Shape& s = v.first->shape().IsTuple() ? v.first->shape().tuple_shape(v.second)
                                                  : v.first->shape();
      slices_[v] = {BufferKind::kOutput, static_cast<int64_t>(k), 0, s.ByteSize()};
    } else {
      pending_copies.push_back(v);
      copies_.push_back({static_cast<int>(k), {}});
    }
  }

  // Liveness of kernel values along the schedule; outputs and copies live to the end.
  std::unordered_map<Value, size_t, ValueHash> last_use;
  std::unordered_map<const Instruction*, size_t> position;
  for (size_t p = 0; p < schedule_.size(); ++p) {
    position[schedule_[p]] = p;
    for (const Instruction* op : schedule_[p]->operands()) {
      Value v = Resolve(op);
      last_use[v] = std::max(last_use[v], p);
    }
  }
  for (const Value& v : pending_copies) last_use[v] = schedule_.size();

  ArenaAllocator arena;
  std::multimap<size_t, Value> dies_at;  // values to free once their last user ran
  for (size_t p = 0; p < schedule_.size(); ++p) {
    for (auto it = dies_at.begin(); it != dies_at.end() && it->first < p;) {
      const BufferSlice& s = slices_[it->second];
      arena.Free(s.offset, s.size);
      it = dies_at.erase(it);
    }
    const Instruction* i = schedule_[p];
    if (!IsKernelInstruction(i)) continue;
    int64_t n = i->shape().IsTuple() ? static_cast<int64_t>(i->shape().tuple_shapes().size()) : 1;
    for (int64_t t = 0; t < n; ++t) {
      Value v{i, t};
      if (slices_.count(v)) continue;  // an output
      const Shape& s = i->shape().IsTuple() ? i->shape().tuple_shape(t) : i->shape();
      BufferSlice slice{BufferKind::kTemp, 0, 0, s.ByteSize()};
      slice.offset = arena.Allocate(slice.size);
      slices_[v] = slice;
      auto lu = last_use.find(v);
      dies_at.emplace(lu == last_use.end() ? p : lu->second, v);
    }
  }
  temp_bytes_ = arena.end();
  for (size_t c = 0; c < copies_.size(); ++c) {
    auto it = slices_.find(pending_copies[c]);
    FJ_CHECK(it != slices_.end(), "output without a buffer");
    copies_[c].source = it->second;
  }
}

const BufferSlice& BufferAssignment::Get(const Instruction* instr, int64_t tuple_index) const {
  Value v = Resolve(instr);
  if (IsKernelInstruction(instr)) v.second = tuple_index;
  auto it = slices_.find(v);
  FJ_CHECK(it != slices_.end(), "no buffer for %", instr->name());
  return it->second;
}

std::string BufferAssignment::ToString() const {
  std::ostringstream os;
  os << "temp arena: " << temp_bytes_ << " bytes\n";
  for (const Instruction* i : schedule_) {
    if (!IsKernelInstruction(i)) continue;
    const BufferSlice& s = Get(i);
    os << "  %" << i->name() << ": ";
    switch (s.kind) {
      case BufferKind::kOutput: os << "output " << s.index; break;
      case BufferKind::kTemp: os << "temp [" << s.offset << ", " << s.offset + s.size << ")"; break;
      default: os << "other"; break;
    }
    os << "\n";
  }
  for (const OutputCopy& c : copies_) os << "  copy into output " << c.output << "\n";
  return os.str();
}

}  // namespace fj
