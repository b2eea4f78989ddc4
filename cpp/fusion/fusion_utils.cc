// Fusion building blocks (see fusion_utils.h).
#include "fusion/fusion_utils.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "analysis/cost_model.h"
#include "fusion/fusible.h"
#include "fusion/fusion_decision.h"
#include "ir/builder.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj {

FusionKind KernelKindFor(const Instruction* instr) {
  switch (instr->opcode()) {
    case Opcode::kReduce:
    case Opcode::kArgMax:
    case Opcode::kArgMin:
      return FusionKind::kInput;
    case Opcode::kDot:
      return FusionKind::kOutput;
    case Opcode::kScatter:
      return FusionKind::kScatter;
    default:
      return FusionKind::kLoop;
  }
}

bool NeedsKernel(const Instruction* instr) {
  switch (instr->opcode()) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kTuple:
    case Opcode::kGetTupleElement:
    case Opcode::kReshape:  // row-major buffers: a reshape is a bitcast, no data moves
    case Opcode::kFusion:
    case Opcode::kWhile:
    case Opcode::kConditional:
    case Opcode::kCall:
    case Opcode::kCustomCall:
      return false;
    default:
      return true;
  }
}

FusionKind ChooseFusionKind(const Computation& fused) {
  for (const Instruction* i : fused.MakePostOrder()) {
    if (i->opcode() == Opcode::kDot) return FusionKind::kOutput;
    if (i->opcode() == Opcode::kScatter) return FusionKind::kScatter;
  }
  return ReductionHero(fused) ? FusionKind::kInput : FusionKind::kLoop;
}

namespace {

std::string FusionName(FusionKind kind, const Computation& fused) {
  const char* prefix = kind == FusionKind::kInput    ? "input"
                       : kind == FusionKind::kOutput ? "output"
                       : kind == FusionKind::kScatter ? "scatter"
                                                      : "loop";
  const Instruction* root = fused.root();
  std::string hero;
  if (root->opcode() == Opcode::kTuple) {
    hero = "multi";
  } else {
    hero = std::string(OpcodeName(root->opcode()));
  }
  std::replace(hero.begin(), hero.end(), '-', '_');
  return std::string(prefix) + "_" + hero + "_fusion";
}

// A value computed by a member: (instruction, tuple element or -1 for an array value).
using Value = std::pair<const Instruction*, int>;

struct ValueHash {
  size_t operator()(const Value& v) const {
    return std::hash<const void*>()(v.first) * 31 + static_cast<size_t>(v.second + 1);
  }
};

// Clones the ops of `body` into `into`, its parameters bound to `args`, and returns the clone
// of its root; `added` (if given) gets the clones, operands first.
Instruction* InlineBody(const Computation& body, Computation* into, const std::vector<Instruction*>& args,
                        std::vector<const Instruction*>* added = nullptr) {
  std::unordered_map<const Instruction*, Instruction*> map;
  for (int i = 0; i < body.num_parameters(); ++i) map[body.parameter(i)] = args[i];
  for (Instruction* bi : body.MakePostOrder()) {
    if (bi->opcode() == Opcode::kParameter) continue;
    std::vector<Instruction*> ops;
    for (Instruction* o : bi->operands()) ops.push_back(map.at(o));
    map[bi] = into->AddInstruction(bi->CloneWithNewOperands(bi->shape(), ops), bi->name());
    if (added) added->push_back(map[bi]);
  }
  return map.at(body.root());
}

}  // namespace

Instruction* FuseInstructions(const std::vector<Instruction*>& members_in,
                              const std::unordered_set<const Instruction*>& duplicated) {
  FJ_CHECK(!members_in.empty());
  Computation* comp = members_in[0]->parent();
  Module* module = comp->parent();
  std::unordered_set<const Instruction*> in_set(members_in.begin(), members_in.end());
  // Members in topological order: a depth-first walk through the members' operands (directly
  // or through a get-tuple-element of a member), not the whole computation's post order,
  // which made growing a kernel of n ops one producer at a time cost n times the
  // computation's size.
  std::vector<Instruction*> members;
  std::unordered_set<const Instruction*> placed;
  auto member_operand = [&](Instruction* op) -> Instruction* {
    if (in_set.count(op)) return op;
    if (op->opcode() == Opcode::kGetTupleElement && in_set.count(op->operand(0))) return op->operand(0);
    return nullptr;
  };
  for (Instruction* start : members_in) {
    FJ_CHECK(start->parent() == comp, "fusion members outside the computation");
    std::vector<std::pair<Instruction*, int>> stack;  // (member, next operand to look at)
    if (!placed.count(start)) stack.push_back({start, 0});
    while (!stack.empty()) {
      auto& [m, next] = stack.back();
      if (next < m->operand_count()) {
        Instruction* op = member_operand(m->operand(next++));
        if (op && !placed.count(op)) stack.push_back({op, 0});
        continue;
      }
      if (placed.insert(m).second) members.push_back(m);
      stack.pop_back();
    }
  }

  Computation* fused = module->AddComputation("fused_computation");
  Builder fb(fused);
  std::vector<Instruction*> fusion_operands;
  std::unordered_map<const Instruction*, Instruction*> param_for;  // outside value -> param
  std::unordered_map<Value, Instruction*, ValueHash> inside;       // member value -> clone

  // The fused value of operand `op` of a member.
  auto value_of = [&](Instruction* op) -> Instruction* {
    if (in_set.count(op)) {
      auto it = inside.find({op, -1});
      FJ_CHECK(it != inside.end(), "member %", op->name(), " used before it was fused");
      return it->second;
    }
    if (op->opcode() == Opcode::kGetTupleElement && in_set.count(op->operand(0))) {
      auto it = inside.find({op->operand(0), static_cast<int>(op->tuple_index())});
      FJ_CHECK(it != inside.end());
      return it->second;
    }
    auto it = param_for.find(op);
    if (it != param_for.end()) return it->second;
    Instruction* p = fb.Parameter(static_cast<int64_t>(fusion_operands.size()), op->shape(),
                                  "param_" + std::to_string(fusion_operands.size()));
    fusion_operands.push_back(op);
    param_for[op] = p;
    return p;
  };

  for (Instruction* m : members) {
    std::vector<Instruction*> ops;
    for (Instruction* op : m->operands()) ops.push_back(value_of(op));
    if (m->opcode() != Opcode::kFusion) {
      Instruction* clone = fused->AddInstruction(m->CloneWithNewOperands(m->shape(), ops), m->name());
      inside[{m, -1}] = clone;
      continue;
    }
    // Inline the member fusion's computation.
    Instruction* root = InlineBody(*m->fused_computation(), fused, ops);
    if (root->opcode() == Opcode::kTuple) {
      for (int k = 0; k < root->operand_count(); ++k) inside[{m, k}] = root->operand(k);
      // The inlined tuple itself is not needed inside.
      if (root->users().empty()) fused->RemoveInstruction(root);
    } else {
      inside[{m, -1}] = root;
    }
  }

  // Outputs: member values used outside the set (duplicated members are not outputs).
  std::vector<Value> outputs;
  auto used_outside = [&](const Instruction* m, int k) {
    for (const Instruction* u : m->users()) {
      if (k >= 0) {
        if (u->opcode() == Opcode::kGetTupleElement && u->tuple_index() == k && !in_set.count(u)) {
          for (const Instruction* uu : u->users()) {
            if (!in_set.count(uu)) return true;
          }
          if (u->IsRoot()) return true;
        }
        continue;
      }
      if (!in_set.count(u)) return true;
    }
    return k < 0 && m->IsRoot();
  };
  for (Instruction* m : members) {
    if (duplicated.count(m)) continue;
    if (m->shape().IsTuple()) {
      for (int k = 0; k < static_cast<int>(m->shape().tuple_shapes().size()); ++k) {
        if (used_outside(m, k)) outputs.push_back({m, k});
      }
    } else if (used_outside(m, -1)) {
      outputs.push_back({m, -1});
    }
  }
  FJ_CHECK(!outputs.empty(), "a fusion without outputs");
  if (outputs.size() == 1) {
    fused->set_root(inside.at(outputs[0]));
  } else {
    std::vector<Instruction*> elems;
    for (const Value& v : outputs) elems.push_back(inside.at(v));
    fused->set_root(fb.Tuple(elems));
  }
  FusionKind kind = ChooseFusionKind(*fused);
  InstructionAttrs attrs;
  attrs.fusion_kind = kind;
  Instruction* fusion = Builder(comp).Add(Opcode::kFusion, fusion_operands, attrs, {fused}, nullptr,
                                          FusionName(kind, *fused));
  fused->set_name(module->UniqueComputationName("fused_" + fusion->name()));
  // Keep the source of the fused root, for explain and errors.
  const Instruction* first = outputs.back().first;
  fusion->set_metadata(ValueOp(first)->metadata());

  // Rewire the users of each output.
  for (size_t k = 0; k < outputs.size(); ++k) {
    Instruction* replacement = fusion;
    if (outputs.size() > 1) replacement = Builder(comp).GetTupleElement(fusion, static_cast<int64_t>(k));
    auto [m, idx] = outputs[k];
    Instruction* member = const_cast<Instruction*>(m);
    if (idx < 0) {
      std::vector<Instruction*> users = member->users();
      for (Instruction* u : users) {
        if (in_set.count(u) || u == replacement) continue;
        for (int i = 0; i < u->operand_count(); ++i) {
          if (u->operand(i) == member) u->ReplaceOperandWith(i, replacement);
        }
      }
      if (member->IsRoot()) comp->set_root(replacement);
    } else {
      std::vector<Instruction*> users = member->users();
      for (Instruction* gte : users) {
        if (gte->opcode() != Opcode::kGetTupleElement || gte->tuple_index() != idx || in_set.count(gte)) continue;
        gte->ReplaceAllUsesWith(replacement);
      }
    }
  }
  // Remove the members that are no longer used (in reverse order), and their bodies.
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    Instruction* m = *it;
    // Dead get-tuple-elements of a multi-output member go first.
    std::vector<Instruction*> users = m->users();
    for (Instruction* u : users) {
      if (u->opcode() == Opcode::kGetTupleElement && u->users().empty() && !u->IsRoot()) {
        comp->RemoveInstruction(u);
      }
    }
    if (!m->users().empty() || m->IsRoot()) continue;  // a duplicated member others still use
    Computation* body = m->opcode() == Opcode::kFusion ? m->fused_computation() : nullptr;
    comp->RemoveInstruction(m);
    if (body) module->RemoveComputation(body);
  }
  return fusion;
}

Instruction* WrapInFusion(Instruction* instr) { return FuseInstructions({instr}); }

Instruction* FuseIntoFusion(Instruction* producer, Instruction* consumer, bool duplicate) {
  FJ_CHECK(consumer->opcode() == Opcode::kFusion && producer->shape().IsArray() && producer->parent() == consumer->parent());
  Computation* comp = consumer->parent();
  Computation* fused = consumer->fused_computation();
  std::vector<int> slots;  // the consumer's operand slots that read the producer
  std::unordered_map<const Instruction*, Instruction*> param_for;  // outside value -> param
  for (int i = 0; i < consumer->operand_count(); ++i) {
    if (consumer->operand(i) == producer) {
      slots.push_back(i);
    } else {
      param_for.emplace(consumer->operand(i), fused->parameter(i));
    }
  }
  FJ_CHECK(!slots.empty(), "%", producer->name(), " is not an operand of %", consumer->name());
  // A producer of a loop's kind (no reduction, dot or scatter) leaves the kernel's kind as
  // it is; others may change it, and a new kind means a new name: FuseInstructions.
  bool loop_kind = producer->opcode() == Opcode::kFusion ? producer->fusion_kind() == FusionKind::kLoop
                                                         : KernelKindFor(producer) == FusionKind::kLoop;
  if (!loop_kind) return nullptr;
  Builder fb(fused);
  auto value_of = [&](Instruction* op) -> Instruction* {
    auto it = param_for.find(op);
    if (it != param_for.end()) return it->second;
    int64_t n = fused->num_parameters();
    Instruction* p = fb.Parameter(n, op->shape(), "param_" + std::to_string(n));
    consumer->AppendOperand(op);
    param_for[op] = p;
    return p;
  };
  std::vector<Instruction*> ops;
  for (Instruction* op : producer->operands()) ops.push_back(value_of(op));
  Instruction* value;
  std::vector<const Instruction*> added;  // operands first
  if (producer->opcode() != Opcode::kFusion) {
    value = fused->AddInstruction(producer->CloneWithNewOperands(producer->shape(), ops), producer->name());
    added.push_back(value);
  } else {
    FJ_CHECK(producer->fused_computation()->root()->opcode() != Opcode::kTuple, "fusing a multi-output fusion in place");
    value = InlineBody(*producer->fused_computation(), fused, ops, &added);
  }
  std::vector<const Instruction*> replaced;
  for (int i : slots) {
    replaced.push_back(fused->parameter(i));
    fused->parameter(i)->ReplaceAllUsesWith(value);
  }
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) {
    consumer->RemoveOperand(*it);
    fused->RemoveParameter(*it);
  }
  // Operands in the order a rebuilt kernel has them (FuseInstructions: the producer's, then
  // the consumer's others): the order of the computation's post order, and with it of the
  // fusion passes' greedy decisions, must not depend on how a kernel was grown.
  std::vector<Instruction*> order;
  std::unordered_map<const Instruction*, Instruction*> param_of;
  for (int i = 0; i < consumer->operand_count(); ++i) param_of.emplace(consumer->operand(i), fused->parameter(i));
  if (param_of.size() == static_cast<size_t>(consumer->operand_count())) {  // no operand twice
    std::vector<Instruction*> operands;
    std::unordered_set<const Instruction*> placed;
    for (Instruction* op : producer->operands()) {
      if (placed.insert(op).second) operands.push_back(op);
    }
    for (Instruction* op : consumer->operands()) {
      if (placed.insert(op).second) operands.push_back(op);
    }
    for (Instruction* op : operands) order.push_back(param_of.at(op));
    fused->ReorderParameters(order);
    consumer->DropAllOperands();
    for (Instruction* op : operands) consumer->AppendOperand(op);
  }
  // The roots stay, but the walk from them to a reduction (ReductionHero) may now end at
  // one of the producer's ops: the kind (and with it the name) follows, as it would for a
  // kernel built anew. Loop-kind producers bring no dot or scatter.
  FusionKind kind = consumer->fusion_kind();
  if (kind == FusionKind::kLoop || kind == FusionKind::kInput) {
    kind = ReductionHero(*fused) ? FusionKind::kInput : FusionKind::kLoop;
  }
  if (kind != consumer->fusion_kind()) {
    consumer->mutable_attrs().fusion_kind = kind;
    comp->Rename(consumer, FusionName(kind, *fused));
    fused->set_name(comp->parent()->UniqueComputationName("fused_" + consumer->name()));
  }
  if (GetDebugFlags().checks) {
    FJ_CHECK(ChooseFusionKind(*fused) == consumer->fusion_kind(), "fusing %", producer->name(),
             " in place changed the kind of %", consumer->name());
  }
  // The producer's ops, then the parameters they read (with new users), users first.
  std::vector<const Instruction*> changed(added.rbegin(), added.rend());
  for (const Instruction* p : ops) {
    if (std::find(changed.begin(), changed.end(), p) == changed.end()) changed.push_back(p);
  }
  EmittedCountCache::Update(*fused, changed);
  KernelCostCache::Grew(consumer, changed, replaced);
  if (!duplicate) {
    FJ_CHECK(producer->users().empty() && !producer->IsRoot(), "%", producer->name(), " has other users");
    Computation* body = producer->opcode() == Opcode::kFusion ? producer->fused_computation() : nullptr;
    comp->RemoveInstruction(producer);
    if (body) comp->parent()->RemoveComputation(body);
  }
  return consumer;
}

}  // namespace fj
