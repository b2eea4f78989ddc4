// Buffer assignment (see buffer_assignment.h).
#include "analysis/buffer_assignment.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "analysis/kernel_heroes.h"
#include "support/error.h"

namespace fj {
namespace {

constexpr int64_t kAlignment = 64;

int64_t AlignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// Instructions that run as a kernel and write their own output buffers.
bool IsKernelInstruction(const Instruction* i) {
  return i->opcode() == Opcode::kFusion || i->opcode() == Opcode::kCustomCall;
}

// Instructions whose (tuple) value has buffers of its own.
bool DefinesBuffers(const Instruction* i) {
  return IsKernelInstruction(i) || i->opcode() == Opcode::kWhile || i->opcode() == Opcode::kConditional;
}

const Shape& ElementShape(const Instruction* i, int64_t index) {
  return i->shape().IsTuple() ? i->shape().tuple_shape(static_cast<int>(index)) : i->shape();
}

// A value flows from a fused parameter to a root through ops that keep positions only.
bool KeepsPositions(const Instruction* i, int64_t elements) {
  if (!i->shape().IsArray() || i->shape().NumElements() != elements) return false;
  return IsElementwise(i->opcode()) || i->opcode() == Opcode::kReshape || i->opcode() == Opcode::kTuple;
}

}  // namespace

int InPlaceUpdateOperand(const Instruction* kernel) {
  if (kernel->opcode() != Opcode::kFusion || !kernel->shape().IsArray()) return -1;
  return InPlaceUpdateParameter(*kernel->fused_computation());
}

namespace {

// The updates a kernel's root makes to the parameter it may update in place (the root, or
// a chain of dynamic-update-slices ending at it), first first; empty if none.
std::vector<const Instruction*> UpdateChain(const Computation& fused) {
  const Instruction* root = fused.root();
  if (root->opcode() != Opcode::kDynamicUpdateSlice && root->opcode() != Opcode::kScatter) return {};
  std::vector<const Instruction*> chain = {root};
  while (root->opcode() == Opcode::kDynamicUpdateSlice && chain.back()->operand(0)->opcode() == Opcode::kDynamicUpdateSlice &&
         chain.back()->operand(0)->user_count() == 1) {
    chain.push_back(chain.back()->operand(0));
  }
  const Instruction* target = chain.back()->operand(0);
  if (target->opcode() != Opcode::kParameter || target->user_count() != 1) return {};
  // Nothing reads the buffer but the next update (also not the updates themselves:
  // `scatter(p, i, p)` must not read what it writes).
  for (const Instruction* u : chain) {
    for (int k = 1; k < u->operand_count(); ++k) {
      const Instruction* o = u->operand(k);
      if (o == target || std::find(chain.begin(), chain.end(), o) != chain.end()) return {};
    }
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

int InPlaceUpdateParameter(const Computation& fused) {
  std::vector<const Instruction*> chain = UpdateChain(fused);
  return chain.empty() ? -1 : static_cast<int>(chain.front()->operand(0)->parameter_number());
}

std::vector<const Instruction*> InPlaceUpdates(const Computation& fused) { return UpdateChain(fused); }

KernelTraffic KernelBytes(const Instruction* kernel, bool in_place) {
  KernelTraffic t;
  for (const Instruction* op : kernel->operands()) t.bytes_read += op->shape().ByteSize();
  t.bytes_written = kernel->shape().ByteSize();
  int slot = in_place ? InPlaceUpdateOperand(kernel) : -1;
  const Instruction* root = slot >= 0 ? kernel->fused_computation()->root() : nullptr;
  if (root && root->opcode() == Opcode::kDynamicUpdateSlice) {
    t.bytes_read -= kernel->operand(slot)->shape().ByteSize();
    t.bytes_written = 0;
    for (const Instruction* u : InPlaceUpdates(*kernel->fused_computation())) t.bytes_written += u->operand(1)->shape().ByteSize();
  }
  return t;
}

bool ReadsOnlyAtOwnPositions(const Instruction* kernel, int slot, int output) {
  if (kernel->opcode() != Opcode::kFusion) return false;
  if (InPlaceUpdateOperand(kernel) == slot && output == 0) return true;
  const Computation* fused = kernel->fused_computation();
  const Instruction* param = fused->parameter(slot);
  int64_t elements = param->shape().NumElements();
  const Instruction* root = fused->root();
  const bool tuple = root->opcode() == Opcode::kTuple;
  if (!tuple && (!root->shape().IsArray() || root->shape().NumElements() != elements)) return false;
  // Every use of the parameter must reach the roots through position-keeping ops only (an
  // element read is then the element written, by the same lane, before the write). A
  // multi-output kernel whose roots are all of the parameter's dimensions computes every
  // root's value of a position before it stores any (KernelEmitter); else (roots walked one
  // after another, a side output's reduction) the parameter must reach `output` alone.
  bool together = false;
  if (tuple && !SideOutputHero(*fused)) {
    together = true;
    for (const Instruction* r : root->operands()) together = together && r->shape().SameDims(param->shape());
  }
  std::vector<const Instruction*> work = {param};
  std::unordered_set<const Instruction*> seen;
  while (!work.empty()) {
    const Instruction* x = work.back();
    work.pop_back();
    if (!seen.insert(x).second) continue;
    for (const Instruction* u : x->users()) {
      if (u == root && tuple) {
        for (int k = 0; k < root->operand_count(); ++k) {
          if (root->operand(k) == x && k != output && !together) return false;
        }
        continue;
      }
      if (!KeepsPositions(u, elements)) return false;
      work.push_back(u);
    }
  }
  return true;
}

// Whether `kernel` is the only reader of `value` (through reshapes, which share buffers).
bool OnlyReader(const Instruction* value, const Instruction* kernel) {
  for (const Instruction* u : value->users()) {
    if (u == kernel) continue;
    if (u->opcode() != Opcode::kReshape || !OnlyReader(u, kernel)) return false;
  }
  return true;
}

// First-fit allocator over the temp arena, with coalescing of freed blocks.
class BufferAssignment::Arena {
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

  // The liveness of the computation being assigned: the temps it owns, freed once their
  // last user ran.
  struct Frame {
    std::unordered_map<Value, size_t, ValueHash> last_use;
    std::multimap<size_t, Value> dies_at;
  };
  std::vector<Frame*> frames;

 private:
  std::map<int64_t, int64_t> free_;
  int64_t end_ = 0;
};

bool BufferAssignment::ReadsElsewhere(const Instruction* kernel, int slot, Value value) const {
  for (int s = 0; s < kernel->operand_count(); ++s) {
    if (s != slot && Resolve(kernel->operand(s)) == value) return true;
  }
  return false;
}

void BufferAssignment::ComputeUpdatedOutputsInPlace() {
  // An output written by an in-place update (a scatter, a dynamic-update-slice) whose
  // operand is a temp of the entry read by nothing else: the operand's kernel writes the
  // output buffer, which the update then changes in place (no copy). XLA's copy insertion
  // gives the same aliasing.
  for (const Instruction* out : outputs_) {
    Value v = Resolve(out);
    const Instruction* kernel = v.first;
    auto own = slices_.find(v);
    if (own == slices_.end() || own->second.kind != BufferKind::kOutput) continue;
    int slot = InPlaceUpdateOperand(kernel);
    if (slot < 0) continue;
    Value u = Resolve(kernel->operand(slot));
    const Instruction* producer = u.first;
    if (!IsKernelInstruction(producer) || producer->parent() != entry_ || slices_.count(u) ||
        !producer->shape().IsArray() || producer->shape().ByteSize() != own->second.size) {
      continue;
    }
    const Instruction* read = kernel->operand(slot);
    while (read != producer && read->opcode() == Opcode::kReshape) read = read->operand(0);
    if (read != producer || !OnlyReader(producer, kernel)) continue;
    if (ReadsElsewhere(kernel, slot, u)) continue;
    slices_[u] = own->second;
    in_place_[kernel] = slot;
  }
}

void BufferAssignment::AliasDonatedParameters(const Module& module) {
  // A candidate per output, by what computes it from a donated parameter of its shape:
  // the parameter itself, an in-place update of it, a loop carrying it as state, or a
  // kernel (reading it at most at its own positions). Each writes the parameter's buffer.
  struct Candidate {
    int k;
    const Instruction* param;
    const Instruction* writer;  // null: the parameter returned as is
    bool updated;
    int slot;  // an update's operand
  };
  std::vector<Candidate> candidates;
  std::unordered_set<const Instruction*> taken;
  std::vector<Value> values(outputs_.size());
  for (size_t k = 0; k < outputs_.size(); ++k) values[k] = Resolve(outputs_[k]);
  auto reads = [&](const Instruction* kernel, const Instruction* param) {
    for (const Instruction* op : kernel->operands()) {
      if (Resolve(op) == Value{param, 0}) return true;
    }
    return false;
  };
  for (int pass = 0; pass < 2; ++pass) {  // first what reads the parameter, then any kernel
    for (size_t k = 0; k < outputs_.size(); ++k) {
      const Value v = values[k];
      if (std::find(values.begin(), values.begin() + k, v) != values.begin() + k) continue;
      if (std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& c) { return c.k == int(k); })) continue;
      for (const Instruction* param : entry_->parameters()) {
        if (taken.count(param) || !module.IsDonated(param->parameter_number()) ||
            !(param->shape() == outputs_[k]->shape())) {
          continue;
        }
        const Value p{param, 0};
        std::optional<Candidate> c;
        const Instruction* def = v.first;
        if (v == p) {
          c = Candidate{int(k), param, nullptr, true, -1};
        } else if (def->opcode() == Opcode::kFusion && def->parent() == entry_ &&
                   def->fusion_kind() != FusionKind::kWholeLoop) {
          int slot = InPlaceUpdateOperand(def);
          if (slot >= 0) {
            if (Resolve(def->operand(slot)) == p && !ReadsElsewhere(def, slot, p)) c = Candidate{int(k), param, def, true, slot};
          } else {
            bool own = true;
            for (int s = 0; s < def->operand_count(); ++s) {
              if (Resolve(def->operand(s)) == p) own = own && ReadsOnlyAtOwnPositions(def, s, static_cast<int>(v.second));
            }
            const Instruction* root = def->fused_computation()->root();
            bool updates = root->opcode() == Opcode::kDynamicUpdateSlice || root->opcode() == Opcode::kScatter;
            if (own && !updates && (pass == 1 || reads(def, param))) c = Candidate{int(k), param, def, false, -1};
          }
        } else if (def->opcode() == Opcode::kWhile && def->parent() == entry_ && def->operand(0)->opcode() == Opcode::kTuple) {
          const Instruction* init = def->operand(0);
          int count = 0;
          for (const Instruction* e : init->operands()) count += Resolve(e) == p;
          if (count == 1 && Resolve(init->operand(static_cast<int>(v.second))) == p) c = Candidate{int(k), param, def, true, -1};
        }
        if (c) {
          candidates.push_back(*c);
          taken.insert(param);
          break;
        }
      }
    }
  }
  if (candidates.empty()) return;

  // Who reads each candidate parameter's buffer in the entry: kernels, loops and
  // conditionals (a tuple's elements are read where the tuple is).
  Readers readers;
  std::unordered_map<const Instruction*, std::vector<Value>> replaces;
  for (const Candidate& c : candidates) {
    readers[{c.param, 0}];
    if (c.writer) replaces[c.writer].push_back({c.param, 0});
  }
  // Loops that pass a parameter on unchanged read it in place, also through their result:
  // readers of that result read the parameter's buffer. (Such a loop may only be the
  // parameter's writer.)
  std::unordered_map<const Instruction*, std::unordered_set<const Instruction*>> read_in_place;
  for (const Instruction* i : entry_->MakePostOrder()) {
    if (!DefinesBuffers(i)) continue;
    for (const Instruction* op : i->operands()) {
      bool tuple = op->opcode() == Opcode::kTuple;
      int n = tuple ? op->operand_count() : 1;
      for (int e = 0; e < n; ++e) {
        Value v = Resolve(tuple ? op->operand(e) : op);
        auto it = readers.find(v);
        if (it == readers.end()) continue;
        it->second.insert(i);
        const Instruction* body_root = i->opcode() == Opcode::kWhile ? i->while_body()->root() : nullptr;
        if (body_root && tuple && body_root->opcode() == Opcode::kTuple &&
            Resolve(body_root->operand(e)) == Value{i, e}) {
          read_in_place[v.first].insert(i);
        }
      }
    }
  }
  std::vector<const Instruction*>& order = schedules_[entry_];
  order = ScheduleWritersLast(*entry_, replaces, readers);
  std::unordered_map<const Instruction*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  for (const Candidate& c : candidates) {
    const Value p{c.param, 0};
    bool ok = true;
    for (size_t j = 0; j < outputs_.size(); ++j) ok = ok && (j == size_t(c.k) || values[j] != p);
    if (c.writer) {
      for (const Instruction* r : readers.at(p)) ok = ok && (r == c.writer || position.at(r) < position.at(c.writer));
      for (const Instruction* loop : read_in_place[c.param]) ok = ok && loop == c.writer;
    }
    if (!ok) continue;
    aliases_[c.k] = {c.param->parameter_number(), c.updated};
    if (c.slot >= 0) {
      in_place_[c.writer] = c.slot;
    } else if (c.writer && c.writer->opcode() == Opcode::kWhile) {
      slices_[values[c.k]] = slices_.at(p);  // the loop's state, in the parameter's buffer
    } else if (c.writer && reads(c.writer, c.param)) {
      in_place_[c.writer] = 0;  // reads and writes one buffer: no noalias
    }
  }
}

BufferAssignment::Value BufferAssignment::Resolve(const Instruction* instr, int64_t index) const {
  while (true) {
    switch (instr->opcode()) {
      case Opcode::kReshape:
        instr = instr->operand(0);
        continue;
      case Opcode::kGetTupleElement:
        index = instr->tuple_index();
        instr = instr->operand(0);
        if (instr->opcode() == Opcode::kTuple) {
          instr = instr->operand(static_cast<int>(index));
          index = 0;
        }
        continue;
      case Opcode::kParameter: {
        auto owner = param_owner_.find(instr);
        if (owner == param_owner_.end()) return {instr, 0};
        const auto& [control, branch] = owner->second;
        if (control->opcode() == Opcode::kWhile) return {control, index};
        // A branch's parameter is its operand tuple in the enclosing computation.
        const Instruction* operand = control->operand(branch + 1);
        if (operand->opcode() == Opcode::kTuple) {
          instr = operand->operand(static_cast<int>(index));
          index = 0;
        } else {
          instr = operand;
        }
        continue;
      }
      default:
        return {instr, DefinesBuffers(instr) ? index : 0};
    }
  }
}

BufferSlice BufferAssignment::NewTemp(Arena& arena, int64_t bytes) {
  BufferSlice s{BufferKind::kTemp, 0, 0, bytes};
  s.offset = arena.Allocate(bytes);
  return s;
}

BufferAssignment::BufferAssignment(const Module& module) : entry_(module.entry()) {
  for (const Computation* c : module.ControlFlowComputations()) {
    for (const Instruction* i : c->MakePostOrder()) {
      if (i->opcode() == Opcode::kWhile) {
        param_owner_[i->while_condition()->parameter(0)] = {i, 0};
        param_owner_[i->while_body()->parameter(0)] = {i, 0};
      } else if (i->opcode() == Opcode::kConditional) {
        for (size_t b = 0; b < i->called_computations().size(); ++b) {
          param_owner_[i->called_computations()[b]->parameter(0)] = {i, static_cast<int>(b)};
        }
      }
    }
  }
  const Instruction* root = entry_->root();
  if (root->opcode() == Opcode::kTuple) {
    for (const Instruction* op : root->operands()) outputs_.push_back(op);
  } else {
    outputs_.push_back(root);
  }
  for (const Instruction* out : outputs_) {
    if (!out->shape().IsArray()) ThrowUnimplemented("nested tuples in program outputs");
  }
  for (const Instruction* i : entry_->MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter) {
      slices_[{i, 0}] = {BufferKind::kParameter, i->parameter_number(), 0, i->shape().ByteSize()};
    }
  }
  aliases_.assign(outputs_.size(), OutputAlias{});
  if (!module.donated_parameters().empty()) AliasDonatedParameters(module);
  // Outputs written in place by the entry kernel that computes them; the rest are copied
  // (but for those in a donated parameter's buffer already: see AliasDonatedParameters).
  std::vector<Value> pending;
  for (size_t k = 0; k < outputs_.size(); ++k) {
    Value v = Resolve(outputs_[k]);
    bool kernel = IsKernelInstruction(v.first) && v.first->parent() == entry_;
    if (!kernel && aliases_[k].parameter >= 0) continue;
    if (kernel && !slices_.count(v)) {
      slices_[v] = {BufferKind::kOutput, static_cast<int64_t>(k), 0, ElementShape(v.first, v.second).ByteSize()};
    } else {
      pending.push_back(v);
      output_copies_.push_back({{BufferKind::kOutput, static_cast<int64_t>(k), 0, 0}, {}});
    }
  }
  ComputeUpdatedOutputsInPlace();
  Arena arena;
  // The loops' iteration counters first, where no kernel's buffer ever goes: they are zeroed
  // when the program starts and read after it ends, and a nested loop's counter adds up
  // over the runs of its enclosing loop. (Taken from the arena as each loop came, a counter
  // got bytes earlier kernels had used and freed: launch_counts read their data.)
  int64_t loops = 0;
  for (const Computation* c : module.ControlFlowComputations()) {
    for (const Instruction* i : c->Instructions()) loops += i->opcode() == Opcode::kWhile;
  }
  next_counter_ = loops > 0 ? arena.Allocate(8 * loops) : 0;
  Assign(*entry_, arena);
  temp_bytes_ = arena.end();
  for (size_t c = 0; c < output_copies_.size(); ++c) {
    output_copies_[c].source = Get(pending[c].first, pending[c].second);
    output_copies_[c].target.size = output_copies_[c].source.size;
  }
}

namespace {

}  // namespace

// The order in which a computation's instructions run: operands first; in a loop body, the
// kernels that compute the next state as late as they can go, and each after every other
// reader of the state element it replaces where it can, so that it may write in place.
std::vector<const Instruction*> BufferAssignment::Schedule(const Computation& c, const Instruction* loop) const {
  if (!loop) {
    std::vector<Instruction*> post = c.MakePostOrder();
    return {post.begin(), post.end()};
  }
  const Instruction* root = c.root();
  // The state element each writer replaces, and the readers of each state element.
  std::unordered_map<const Instruction*, std::vector<Value>> replaces;
  for (int k = 0; root->opcode() == Opcode::kTuple && k < root->operand_count(); ++k) {
    Value v = Resolve(root->operand(k));
    if (IsKernelInstruction(v.first) && v.first->parent() == &c) replaces[v.first].push_back({loop, k});
  }
  Readers readers;
  for (const Instruction* i : c.MakePostOrder()) {
    if (i == root) continue;
    for (const Instruction* op : i->operands()) {
      Value v = Resolve(op);
      if (v.first == loop) readers[v].insert(i);
    }
  }
  return ScheduleWritersLast(c, replaces, std::move(readers));
}

std::vector<const Instruction*> BufferAssignment::ScheduleWritersLast(
    const Computation& c, const std::unordered_map<const Instruction*, std::vector<Value>>& replaces,
    Readers readers) const {
  std::vector<Instruction*> post = c.MakePostOrder();
  std::vector<const Instruction*> order;
  std::unordered_map<const Instruction*, int> pending;
  std::vector<const Instruction*> ready, ready_writers;
  for (const Instruction* i : post) {
    std::unordered_set<const Instruction*> ops(i->operands().begin(), i->operands().end());
    pending[i] = static_cast<int>(ops.size());
    if (ops.empty()) (replaces.count(i) ? ready_writers : ready).push_back(i);
  }
  auto unblocked = [&](const Instruction* w) {
    for (const Value& v : replaces.at(w)) {
      for (const Instruction* r : readers[v]) {
        if (r != w) return false;
      }
    }
    return true;
  };
  while (!ready.empty() || !ready_writers.empty()) {
    const Instruction* i;
    if (!ready.empty()) {
      i = ready.front();
      ready.erase(ready.begin());
    } else {
      auto it = std::find_if(ready_writers.begin(), ready_writers.end(), unblocked);
      if (it == ready_writers.end()) it = ready_writers.begin();
      i = *it;
      ready_writers.erase(it);
    }
    order.push_back(i);
    for (auto& [v, rs] : readers) rs.erase(i);
    for (const Instruction* u : i->users()) {
      if (--pending[u] == 0) (replaces.count(u) ? ready_writers : ready).push_back(u);
    }
  }
  return order;
}

void BufferAssignment::Assign(const Computation& c, Arena& arena) {
  std::vector<const Instruction*>& schedule = schedules_[&c];
  if (schedule.empty()) schedule = Schedule(c, nullptr);
  Arena::Frame frame;
  arena.frames.push_back(&frame);
  for (size_t p = 0; p < schedule.size(); ++p) {
    for (const Instruction* op : schedule[p]->operands()) {
      Value v = Resolve(op);
      frame.last_use[v] = std::max(frame.last_use[v], p);
      // A tuple's elements are read where the tuple is (two loops may start from one
      // initial state: the first must not take its elements over as its own state).
      if (op->opcode() == Opcode::kTuple) {
        for (const Instruction* e : op->operands()) {
          Value ev = Resolve(e);
          frame.last_use[ev] = std::max(frame.last_use[ev], p);
        }
      }
    }
  }
  // What the computation returns lives to its end (the parent copies or reads it after).
  for (const Instruction* op : c.root()->operands()) frame.last_use[Resolve(op)] = schedule.size();
  frame.last_use[Resolve(c.root())] = schedule.size();
  if (&c == entry_) {
    for (const Instruction* out : outputs_) frame.last_use[Resolve(out)] = schedule.size();
  }
  auto last_use = [&](const Value& v) {
    auto it = frame.last_use.find(v);
    return it == frame.last_use.end() ? size_t{0} : it->second;
  };

  for (size_t p = 0; p < schedule.size(); ++p) {
    const Instruction* i = schedule[p];
    if (i->opcode() == Opcode::kWhile && i->operand(0)->opcode() == Opcode::kTuple) {
      // The initial state's temps that die here become the state buffers (no copy); those
      // of elements the body passes on unchanged are read in place, as long as the loop's
      // result is (see AssignLoop).
      const Instruction* init = i->operand(0);
      const Instruction* body_root = i->while_body()->root();
      for (int k = 0; k < init->operand_count(); ++k) {
        Value u = Resolve(init->operand(k));
        Value state{i, k};
        if (body_root->opcode() == Opcode::kTuple && Resolve(body_root->operand(k)) == state) {
          auto it = std::find_if(frame.dies_at.begin(), frame.dies_at.end(), [&](const auto& e) { return e.second == u; });
          size_t until = std::max(p, last_use(state));
          if (it != frame.dies_at.end() && it->first < until) {
            frame.dies_at.erase(it);
            frame.dies_at.emplace(until, u);
          }
          continue;
        }
        bool once = true;
        for (int j = 0; j < init->operand_count(); ++j) once = once && (j == k || Resolve(init->operand(j)) != u);
        auto it = std::find_if(frame.dies_at.begin(), frame.dies_at.end(), [&](const auto& e) { return e.second == u; });
        // `it->first`, not `last_use(u)`: an earlier loop that reads `u` in place as its
        // unchanged state keeps it alive until that loop's result is last read.
        if (!once || it == frame.dies_at.end() || it->first > p) continue;
        frame.dies_at.erase(it);
        slices_[state] = slices_.at(u);
        // The loop itself uses its state, also an element nothing reads after it.
        frame.dies_at.emplace(std::max(p, last_use(state)), state);
      }
    }
    for (auto it = frame.dies_at.begin(); it != frame.dies_at.end() && it->first < p;) {
      const BufferSlice& s = slices_.at(it->second);
      arena.Free(s.offset, s.size);
      it = frame.dies_at.erase(it);
    }
    if (i->opcode() == Opcode::kWhile) {
      AssignLoop(i, arena);
      continue;
    }
    if (i->opcode() == Opcode::kConditional) {
      AssignConditional(i, arena);
      continue;
    }
    if (i->opcode() == Opcode::kConstant) {
      BufferSlice s{BufferKind::kConstant, 0, 0, i->shape().ByteSize()};
      s.constant = i;
      slices_[{i, 0}] = s;
      continue;
    }
    if (!IsKernelInstruction(i)) continue;
    int64_t n = i->shape().IsTuple() ? static_cast<int64_t>(i->shape().tuple_shapes().size()) : 1;
    for (int64_t t = 0; t < n; ++t) {
      Value v{i, t};
      if (slices_.count(v)) continue;  // an output, or loop state written in place
      int slot = InPlaceUpdateOperand(i);
      if (slot >= 0 && !ReadsElsewhere(i, slot, Resolve(i->operand(slot)))) {
        // Update the operand's own temp where nothing reads it after this kernel.
        Value u = Resolve(i->operand(slot));
        auto it = std::find_if(frame.dies_at.begin(), frame.dies_at.end(), [&](const auto& e) { return e.second == u; });
        if (it != frame.dies_at.end() && it->first <= p) {  // (as for a loop's state, above)
          frame.dies_at.erase(it);
          slices_[v] = slices_.at(u);
          frame.dies_at.emplace(last_use(v), v);
          in_place_[i] = slot;
          continue;
        }
      }
      slices_[v] = NewTemp(arena, ElementShape(i, t).ByteSize());
      frame.dies_at.emplace(last_use(v), v);
    }
  }
  for (const auto& [p, v] : frame.dies_at) {
    const BufferSlice& s = slices_.at(v);
    arena.Free(s.offset, s.size);
  }
  arena.frames.pop_back();
}

void BufferAssignment::AssignLoop(const Instruction* loop, Arena& arena) {
  Arena::Frame& parent = *arena.frames.back();
  LoopPlan& plan = loops_[loop];
  int n = static_cast<int>(loop->shape().tuple_shapes().size());
  const Instruction* init = loop->operand(0);
  const Instruction* body_root = loop->while_body()->root();
  for (int k = 0; k < n; ++k) {
    Value state{loop, k};
    const Instruction* init_k = init->opcode() == Opcode::kTuple ? init->operand(k) : init;
    BufferSlice source = init->opcode() == Opcode::kTuple ? Get(init_k) : Get(init, k);
    // An element the body passes on unchanged is read in place from its initial value
    // (xs of a scan, closed-over constants): nothing writes it during the loop.
    bool invariant = body_root->opcode() == Opcode::kTuple && Resolve(body_root->operand(k)) == state;
    if (invariant && !slices_.count(state) && source.kind != BufferKind::kOutput) {
      slices_[state] = source;  // its temp's life was extended to cover the loop (Assign)
      continue;
    }
    if (!slices_.count(state)) {
      slices_[state] = NewTemp(arena, loop->shape().tuple_shape(k).ByteSize());
      auto lu = parent.last_use.find(state);
      parent.dies_at.emplace(lu == parent.last_use.end() ? 0 : lu->second, state);
    }
    if (!(source == slices_.at(state))) plan.before.push_back({slices_.at(state), source});
  }
  plan.counter_offset = next_counter_;  // (reserved at the arena's start: see the constructor)
  next_counter_ += 8;

  const Computation* body = loop->while_body();
  const Instruction* root = body->root();
  std::vector<const Instruction*>& order = schedules_[body];
  order = Schedule(*body, loop);
  std::unordered_map<const Instruction*, size_t> position;
  for (size_t p = 0; p < order.size(); ++p) position[order[p]] = p;
  // Readers of each old state element in the body: (position, reader).
  std::vector<std::vector<std::pair<size_t, const Instruction*>>> readers(n);
  for (const Instruction* i : order) {
    if (i == root) continue;
    for (int s = 0; s < i->operand_count(); ++s) {
      Value v = Resolve(i->operand(s));
      if (v.first == loop) readers[v.second].push_back({position[i], i});
    }
  }
  std::vector<Value> results(n);
  for (int k = 0; k < n; ++k) results[k] = root->opcode() == Opcode::kTuple ? Resolve(root->operand(k)) : Value{loop, k};
  // A state element passed on into another element is read at the end of the iteration.
  std::vector<bool> read_at_end(n, false);
  for (int k = 0; k < n; ++k) {
    if (results[k].first == loop && results[k].second != k) read_at_end[results[k].second] = true;
  }
  std::vector<bool> in_place(n, false);
  for (int k = 0; k < n; ++k) {
    const auto& [kernel, out] = results[k];
    if (kernel == loop || !IsKernelInstruction(kernel) || kernel->parent() != body || read_at_end[k]) continue;
    bool unique = true;
    for (int j = 0; j < n; ++j) unique = unique && (j == k || results[j] != results[k]);
    if (!unique || slices_.count(results[k])) continue;
    bool ok = true;
    for (const auto& [p, reader] : readers[k]) {
      if (reader == kernel) {
        for (int s = 0; s < kernel->operand_count() && ok; ++s) {
          Value v = Resolve(kernel->operand(s));
          if (v == Value{loop, k}) ok = ReadsOnlyAtOwnPositions(kernel, s, static_cast<int>(out));
        }
      } else if (p > position[kernel]) {
        ok = false;  // the old value is read after the kernel writes the new one
      }
      if (!ok) break;
    }
    if (!ok) continue;
    slices_[results[k]] = slices_.at(Value{loop, k});
    in_place[k] = true;
    for (const auto& [p, reader] : readers[k]) {
      if (reader == kernel) in_place_[kernel] = 0;
    }
  }
  // Elements carried from another element go through a staging buffer: its source may be
  // overwritten by a copy of its own.
  std::vector<BufferSlice> staged(n);
  for (int k = 0; k < n; ++k) {
    if (results[k].first == loop && results[k].second != k) staged[k] = NewTemp(arena, loop->shape().tuple_shape(k).ByteSize());
  }
  Assign(*loop->while_condition(), arena);
  Assign(*body, arena);
  for (int k = 0; k < n; ++k) {
    if (results[k].first == loop && results[k].second != k) {
      plan.after_body.push_back({staged[k], slices_.at(results[k])});
      arena.Free(staged[k].offset, staged[k].size);
    }
  }
  for (int k = 0; k < n; ++k) {
    if (in_place[k] || results[k] == Value{loop, k}) continue;
    BufferSlice source = results[k].first == loop ? staged[k] : Get(results[k].first, results[k].second);
    plan.after_body.push_back({slices_.at(Value{loop, k}), source});
  }
}

void BufferAssignment::AssignConditional(const Instruction* cond, Arena& arena) {
  Arena::Frame& parent = *arena.frames.back();
  int n = static_cast<int>(cond->shape().tuple_shapes().size());
  for (int k = 0; k < n; ++k) {
    Value out{cond, k};
    slices_[out] = NewTemp(arena, cond->shape().tuple_shape(k).ByteSize());
    auto lu = parent.last_use.find(out);
    parent.dies_at.emplace(lu == parent.last_use.end() ? 0 : lu->second, out);
  }
  std::vector<std::vector<BufferCopy>>& copies = branches_[cond];
  for (const Computation* branch : cond->called_computations()) {
    const Instruction* root = branch->root();
    std::vector<Value> results(n);
    for (int k = 0; k < n; ++k) results[k] = Resolve(root->opcode() == Opcode::kTuple ? root->operand(k) : root, root->opcode() == Opcode::kTuple ? 0 : k);
    std::vector<bool> written(n, false);
    for (int k = 0; k < n; ++k) {
      const Instruction* kernel = results[k].first;
      if (!IsKernelInstruction(kernel) || kernel->parent() != branch || slices_.count(results[k])) continue;
      bool unique = true;
      for (int j = 0; j < n; ++j) unique = unique && (j == k || results[j] != results[k]);
      if (!unique) continue;
      slices_[results[k]] = slices_.at(Value{cond, k});
      written[k] = true;
    }
    Assign(*branch, arena);
    std::vector<BufferCopy> own;
    for (int k = 0; k < n; ++k) {
      if (!written[k]) own.push_back({slices_.at(Value{cond, k}), Get(results[k].first, results[k].second)});
    }
    copies.push_back(std::move(own));
  }
}

const BufferSlice& BufferAssignment::Get(const Instruction* instr, int64_t tuple_index) const {
  Value v = Resolve(instr, tuple_index);
  if (DefinesBuffers(instr)) v.second = tuple_index;
  auto it = slices_.find(v);
  FJ_CHECK(it != slices_.end(), "no buffer for %", instr->name());
  return it->second;
}

std::string BufferAssignment::ToString() const {
  std::ostringstream os;
  os << "temp arena: " << temp_bytes_ << " bytes\n";
  auto describe = [&](const BufferSlice& s) {
    switch (s.kind) {
      case BufferKind::kOutput: os << "output " << s.index; break;
      case BufferKind::kTemp: os << "temp [" << s.offset << ", " << s.offset + s.size << ")"; break;
      case BufferKind::kParameter: os << "parameter " << s.index; break;
      case BufferKind::kConstant: os << "constant %" << s.constant->name(); break;
    }
  };
  std::function<void(const Computation*, int)> show = [&](const Computation* c, int depth) {
    std::string indent(2 * depth + 2, ' ');
    for (const Instruction* i : schedules_.at(c)) {
      if (!DefinesBuffers(i)) continue;
      int64_t n = i->shape().IsTuple() ? static_cast<int64_t>(i->shape().tuple_shapes().size()) : 1;
      for (int64_t t = 0; t < n; ++t) {
        os << indent << "%" << i->name();
        if (i->shape().IsTuple()) os << "{" << t << "}";
        os << ": ";
        describe(Get(i, t));
        if (t == 0 && WritesInPlace(i)) os << " (in place)";
        os << "\n";
      }
      if (i->opcode() == Opcode::kWhile) {
        const LoopPlan& plan = loop(i);
        os << indent << "  " << plan.before.size() << " copies into the state, " << plan.after_body.size()
           << " per iteration, its iteration counter at [" << plan.counter_offset << ", "
           << plan.counter_offset + 8 << ")\n";
        show(i->while_condition(), depth + 1);
        show(i->while_body(), depth + 1);
      } else if (i->opcode() == Opcode::kConditional) {
        for (const Computation* b : i->called_computations()) show(b, depth + 1);
      }
    }
  };
  show(entry_, 0);
  for (const BufferCopy& c : output_copies_) os << "  copy into output " << c.target.index << "\n";
  for (size_t k = 0; k < aliases_.size(); ++k) {
    if (aliases_[k].parameter < 0) continue;
    os << "  output " << k << " in donated parameter " << aliases_[k].parameter << "'s buffer"
       << (aliases_[k].updated ? " (updated in place)" : "") << "\n";
  }
  return os.str();
}

}  // namespace fj
