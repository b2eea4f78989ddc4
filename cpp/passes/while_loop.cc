// Loop passes (see while_loop.h).
#include "passes/while_loop.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_set>

#include "analysis/loop_analysis.h"
#include "ir/builder.h"
#include "ir/clone.h"
#include "support/error.h"

namespace fj {
namespace {

// The while loops of the module's control-flow computations, innermost first.
std::vector<Instruction*> Loops(Module& module) {
  std::vector<Instruction*> loops;
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* i : c->MakePostOrder()) {
      if (i->opcode() == Opcode::kWhile) loops.push_back(i);
    }
  }
  return loops;
}

// The uses of each element of `loop`'s result: its get-tuple-element users.
std::vector<std::vector<Instruction*>> ElementUsers(const Instruction* loop) {
  std::vector<std::vector<Instruction*>> users(loop->shape().tuple_shapes().size());
  for (Instruction* u : loop->users()) {
    if (u->opcode() == Opcode::kGetTupleElement) users[u->tuple_index()].push_back(u);
  }
  return users;
}

// Replaces `loop` by the tuple-valued `state` (its users read it through
// get-tuple-element, which simplification folds).
void ReplaceLoop(Instruction* loop, Instruction* state) {
  Computation* c = loop->parent();
  loop->ReplaceAllUsesWith(state);
  c->RemoveInstruction(loop);
}

// The elements of the parameter of `comp` (one tuple) that `value` depends on.
void ParamElementsUsed(const Instruction* value, std::unordered_set<int64_t>& out) {
  std::vector<const Instruction*> work = {value};
  std::unordered_set<const Instruction*> seen;
  while (!work.empty()) {
    const Instruction* x = work.back();
    work.pop_back();
    if (!seen.insert(x).second) continue;
    if (x->opcode() == Opcode::kGetTupleElement && x->operand(0)->opcode() == Opcode::kParameter) {
      out.insert(x->tuple_index());
      continue;
    }
    if (x->opcode() == Opcode::kParameter) {
      for (size_t k = 0; k < x->shape().tuple_shapes().size(); ++k) out.insert(static_cast<int64_t>(k));
      continue;
    }
    for (const Instruction* op : x->operands()) work.push_back(op);
  }
}

// A copy of `c` (a loop condition or body) whose parameter holds only the elements in
// `keep` (old element -> new element); removed elements must be unused by what it keeps.
// With `root_keep`, the root tuple keeps only those elements too.
Computation* Restrict(const Computation& c, const std::vector<int>& keep, bool restrict_root) {
  const Instruction* param = c.parameter(0);
  std::vector<Shape> shapes;
  for (size_t k = 0; k < keep.size(); ++k) {
    if (keep[k] >= 0) shapes.push_back(param->shape().tuple_shape(static_cast<int>(k)));
  }
  Computation* out = c.parent()->AddComputation(c.name());
  Builder b(out);
  Instruction* p = b.Parameter(0, Shape::Tuple(shapes), "p");
  std::vector<Instruction*> elems;
  for (size_t k = 0; k < keep.size(); ++k) {
    const Shape& s = param->shape().tuple_shape(static_cast<int>(k));
    if (keep[k] >= 0) {
      elems.push_back(b.GetTupleElement(p, keep[k]));
    } else {
      // Read by nothing that stays: a placeholder that dead-code elimination removes.
      elems.push_back(b.Broadcast(b.ScalarConstant(s.dtype(), 0), s.dims(), {}));
    }
  }
  Instruction* root = InlineComputation(c, out, {b.Tuple(elems)});
  if (restrict_root) {
    std::vector<Instruction*> kept;
    for (size_t k = 0; k < keep.size(); ++k) {
      if (keep[k] >= 0) kept.push_back(root->operand(static_cast<int>(k)));
    }
    root = b.Tuple(kept);
  }
  out->set_root(root);
  return out;
}

bool RemoveDeadElements(Instruction* loop) {
  const Computation* body = loop->while_body();
  const Instruction* root = body->root();
  if (root->opcode() != Opcode::kTuple || loop->operand(0)->opcode() != Opcode::kTuple) return false;
  int n = root->operand_count();
  std::vector<std::vector<Instruction*>> users = ElementUsers(loop);
  // (A body with a side effect keeps its whole state: what it reads is not root-reachable.)
  if (loop->IsRoot() || HasSideEffects(loop)) return false;
  for (const Instruction* u : loop->users()) {
    if (u->opcode() != Opcode::kGetTupleElement) return false;  // the whole state is read
  }
  std::unordered_set<int64_t> live;
  for (int k = 0; k < n; ++k) {
    if (!users[k].empty()) live.insert(k);
  }
  ParamElementsUsed(loop->while_condition()->root(), live);
  for (bool grew = true; grew;) {
    grew = false;
    std::unordered_set<int64_t> next = live;
    for (int64_t k : live) ParamElementsUsed(root->operand(static_cast<int>(k)), next);
    grew = next.size() != live.size();
    live = std::move(next);
  }
  if (static_cast<int>(live.size()) == n) return false;
  std::vector<int> keep(n, -1);
  int m = 0;
  for (int k = 0; k < n; ++k) {
    if (live.count(k)) keep[k] = m++;
  }
  Computation* parent = loop->parent();
  Builder b(parent);
  std::vector<Instruction*> init;
  for (int k = 0; k < n; ++k) {
    if (keep[k] >= 0) init.push_back(loop->operand(0)->operand(k));
  }
  Computation* cond = Restrict(*loop->while_condition(), keep, false);
  Computation* new_body = Restrict(*body, keep, true);
  InstructionAttrs attrs = loop->attrs();
  Instruction* tuple = b.Tuple(init);
  Instruction* smaller = b.Add(Opcode::kWhile, {tuple}, attrs, {cond, new_body});
  smaller->set_metadata(loop->metadata());
  for (int k = 0; k < n; ++k) {
    for (Instruction* u : users[k]) u->ReplaceAllUsesWith(b.GetTupleElement(smaller, keep[k]));
  }
  for (int k = 0; k < n; ++k) {
    for (Instruction* u : users[k]) parent->RemoveInstruction(u);
  }
  parent->RemoveInstruction(loop);
  return true;
}

}  // namespace

bool WhileTripCountPass::Run(Module& module) {
  bool changed = false;
  for (Instruction* loop : Loops(module)) {
    // Loops this file made (unrolled ones count several steps per iteration) keep the
    // trip count they were given.
    std::optional<CountedLoop> counted = MatchCountedLoop(loop);
    if (!counted) continue;
    int64_t trip = counted->trip_count;
    if (loop->attrs().trip_count != trip) {
      loop->mutable_attrs().trip_count = trip;
      changed = true;
    }
  }
  return changed;
}

bool WhileLoopSimplifyPass::Run(Module& module) {
  bool changed = false;
  for (Instruction* loop : Loops(module)) {
    const Instruction* init = loop->operand(0);
    if (init->opcode() != Opcode::kTuple) continue;
    std::optional<CountedLoop> counted = MatchCountedLoop(loop);
    if (counted && counted->trip_count == 0) {
      ReplaceLoop(loop, const_cast<Instruction*>(init));
      changed = true;
      continue;
    }
    if (counted && counted->trip_count == 1) {
      Instruction* state = InlineComputation(*loop->while_body(), loop->parent(), {const_cast<Instruction*>(init)});
      ReplaceLoop(loop, state);
      changed = true;
      continue;
    }
    // Elements the body passes on unchanged: read them from the initial state.
    const Instruction* root = loop->while_body()->root();
    if (root->opcode() == Opcode::kTuple) {
      std::vector<std::vector<Instruction*>> users = ElementUsers(loop);
      for (int k = 0; k < root->operand_count(); ++k) {
        const Instruction* r = root->operand(k);
        bool same = r->opcode() == Opcode::kGetTupleElement && r->tuple_index() == k &&
                    r->operand(0)->opcode() == Opcode::kParameter;
        if (!same || users[k].empty()) continue;
        for (Instruction* u : users[k]) {
          u->ReplaceAllUsesWith(init->operand(k));
          u->parent()->RemoveInstruction(u);
        }
        changed = true;
      }
    }
    changed = RemoveDeadElements(loop) || changed;
  }
  return changed;
}

int64_t WhileLoopUnrollPass::KernelEndingOps(const Computation& body) {
  int64_t n = 0;
  for (const Instruction* i : body.Instructions()) {
    switch (i->opcode()) {
      case Opcode::kReduce: case Opcode::kArgMax: case Opcode::kArgMin: case Opcode::kDot:
      case Opcode::kScatter: case Opcode::kWhile: case Opcode::kConditional:
      case Opcode::kCustomCall:
        ++n;
        break;
      default:
        break;
    }
  }
  return n;
}

int64_t WhileLoopUnrollPass::ChooseFactor(double body_us, int64_t trip_count, int64_t max_factor) {
  // A body this cheap is dominated by the loop's own overhead (its kernels' calls and
  // their loops' set-up, the state's round trips through memory): running several
  // iterations per trip, fused, amortises them. Factors that divide the trip count need
  // no remainder code.
  if (trip_count < 16 || body_us > 20.0) return 1;
  for (int64_t f : {8, 10, 5, 4, 2}) {
    if (f <= max_factor && trip_count % f == 0) return f;
  }
  return std::min<int64_t>(4, max_factor);
}

bool WhileLoopUnrollPass::Run(Module& module) {
  bool changed = false;
  for (Instruction* loop : Loops(module)) {
    std::optional<CountedLoop> counted = MatchCountedLoop(loop);
    if (!counted || loop->operand(0)->opcode() != Opcode::kTuple) continue;
    int64_t factor = loop->attrs().unroll;
    int64_t trips = counted->trip_count;
    std::string why;
    if (factor > 0) {
      why = "the user's unroll=" + std::to_string(factor);
    } else if (choose_) {
      int64_t ops = loop->while_body()->instruction_count();
      int64_t kernels = KernelEndingOps(*loop->while_body());
      // A rough per-iteration estimate before fusion: bytes through memory at a few GB/s.
      double body_us = static_cast<double>(loop->shape().ByteSize()) / 4e3;
      // The unrolled body stays small enough for LLVM: it takes superlinear time on long
      // straight-line kernels (eight copies of a body that splits a PRNG key three ways,
      // 2,600 ops, took it 23 s). A step of several kernels gains little: unrolled, it
      // launches as many kernels, and only the loop's own step is saved (an LU
      // factorisation's 24 steps of 7 kernels, unrolled by 8: 88 kernels, 3 s to compile,
      // no faster).
      bool small = ops <= 400 && kernels <= kMaxUnrolledKernelEnds;
      factor = small ? ChooseFactor(body_us, trips, std::max<int64_t>(1, kMaxUnrolledOps / ops)) : 1;
      char figures[96];
      std::snprintf(figures, sizeof figures, "%lld ops, a %lld-byte state, ~%.2g us a step",
                    static_cast<long long>(ops), static_cast<long long>(loop->shape().ByteSize()), body_us);
      why = factor > 1 ? "chosen by the cost model: a small body (" + std::string(figures) +
                             ") costs mostly loop overhead, which unrolling amortises"
            : ops > 400 ? "the cost model keeps it: a large body (" + std::string(figures) + ")"
            : !small ? "the cost model keeps it: a step of " + std::to_string(kernels) +
                           " reductions, dots or other kernel-ending ops is that many kernels, which "
                           "unrolled copies would launch as often and compile once each"
            : trips < 16 ? "the cost model keeps it: only " + std::to_string(trips) + " steps"
                         : "the cost model keeps it: the body's own work dominates (" + std::string(figures) + ")";
    } else {
      why = "no unroll factor given";
    }
    if (note_) note_(loop, std::max<int64_t>(factor, 1), why);
    if (factor <= 1) continue;
    Computation* parent = loop->parent();
    const Computation& body = *loop->while_body();
    Instruction* state = loop->operand(0);
    if (factor >= trips) {
      for (int64_t t = 0; t < trips; ++t) state = InlineComputation(body, parent, {state});
      ReplaceLoop(loop, state);
      changed = true;
      continue;
    }
    int64_t whole = trips / factor;
    int64_t rest = trips % factor;
    // The new body: `factor` copies of the old one in a row.
    Computation* unrolled = parent->parent()->AddComputation(body.name() + ".unrolled");
    Builder ub(unrolled);
    Instruction* s = ub.Parameter(0, body.parameter(0)->shape(), "p");
    for (int64_t k = 0; k < factor; ++k) s = InlineComputation(body, unrolled, {s});
    unrolled->set_root(s);
    // The new condition stops after the whole trips: counter < start + whole * factor.
    Computation* cond = CloneComputation(*loop->while_condition(), loop->while_condition()->name());
    Instruction* compare = cond->root();
    int limit_slot = compare->direction() == ComparisonDirection::kLt ? 1 : 0;
    Instruction* limit = compare->operand(limit_slot);
    Instruction* new_limit = Builder(cond).ScalarConstant(limit->dtype(), static_cast<double>(counted->start + whole * factor));
    compare->ReplaceOperandWith(limit_slot, new_limit);
    if (limit->users().empty()) cond->RemoveInstruction(limit);
    InstructionAttrs attrs = loop->attrs();
    attrs.unroll = 1;  // done
    attrs.trip_count = whole;
    Instruction* trip_loop = Builder(parent).Add(Opcode::kWhile, {state}, attrs, {cond, unrolled});
    trip_loop->set_metadata(loop->metadata());
    Instruction* after = trip_loop;
    for (int64_t k = 0; k < rest; ++k) after = InlineComputation(body, parent, {after});
    ReplaceLoop(loop, after);
    changed = true;
  }
  return changed;
}

}  // namespace fj
