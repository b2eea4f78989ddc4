// Whole-loop fusion (see whole_loop_fusion.h).
#include "fusion/whole_loop_fusion.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "analysis/loop_analysis.h"
#include "ir/builder.h"
#include "ir/clone.h"
#include "ir/whole_loop.h"
#include "support/error.h"

namespace fj {
namespace {

// Carries that are not lanes are recomputed by every block of lanes: only small ones.
constexpr int64_t kMaxUniformElements = 16;

struct Output {
  int element;
  Instruction* value;  // the lanes' value (S), or the reduce of them
  Instruction* row;    // where it goes in the stacked output
};

struct Match {
  CountedLoop counted;
  bool until_done = false;                     // a loop until its lanes are done (whole_loop.h)
  const Instruction* predicate = nullptr;      // then: the lanes' predicate in the condition
  std::vector<int> lane, uniform, invariant;
  std::vector<Output> lane_outputs, reductions;
  std::vector<int64_t> lanes;
  std::string why_not;
};

std::string Name(const Instruction* i) { return "%" + i->name(); }

// Shapes that hold the same lanes: equal dimensions once those of size one are dropped.
bool SameLanes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> x, y;
  for (int64_t d : a) if (d != 1) x.push_back(d);
  for (int64_t d : b) if (d != 1) y.push_back(d);
  return x == y;
}

bool IsParamElement(const Instruction* i, int64_t k) {
  return i->opcode() == Opcode::kGetTupleElement && i->tuple_index() == k && i->operand(0)->opcode() == Opcode::kParameter;
}

// Whether a reduction starts from its combiner's identity: partial results per block of
// lanes are combined with the same combiner and init.
bool InitIsIdentity(const Instruction* reduce) {
  const Instruction* init = reduce->operand(1);
  if (init->opcode() != Opcode::kConstant) return false;
  const Literal& lit = init->literal();
  DType t = init->dtype();
  double v = lit.GetDouble(0);
  int bits = DTypeBits(t);
  int64_t lowest = IsSignedInt(t) ? (bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1))) : 0;
  uint64_t highest = IsSignedInt(t) ? (uint64_t{1} << (bits - 1)) - 1 : bits == 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1;
  switch (reduce->to_apply()->root()->opcode()) {
    case Opcode::kAdd:
    case Opcode::kOr:
    case Opcode::kXor:
      return v == 0;
    case Opcode::kMultiply:
    case Opcode::kAnd:
      return IsPred(t) ? v != 0 : v == 1;
    case Opcode::kMaximum:
      return IsFloat(t) ? v == -std::numeric_limits<double>::infinity() : lit.GetInt64(0) == lowest;
    case Opcode::kMinimum:
      return IsFloat(t) ? v == std::numeric_limits<double>::infinity() : lit.GetUint64(0) == highest;
    default:
      return false;
  }
}

// Why a step computation cannot be one kernel's inner loop (an op that is not elemental), or "".
std::string UnfusibleOp(const Computation& c, const std::string& part) {
  for (const Instruction* i : c.MakePostOrder()) {
    Opcode op = i->opcode();
    if (op == Opcode::kCustomCall && HasSideEffects(i)) {
      return "its " + part + " calls the host (fusionjit.debug.print or debug.callback at " + i->metadata() +
             ") between its kernels";
    }
    if (op == Opcode::kWhile || op == Opcode::kConditional || op == Opcode::kCustomCall || op == Opcode::kCall ||
        op == Opcode::kScatter) {
      return "its " + part + " holds " + std::string(OpcodeName(op)) + " " + Name(i);
    }
    if (op == Opcode::kFusion && i->fusion_kind() == FusionKind::kWholeLoop) {
      return "its " + part + " holds a loop that runs as one kernel of its own, " + Name(i);
    }
  }
  return "";
}

// Which values of `c` (a loop's body or condition) depend on its lane carries, each with
// its lane dimensions; "" or why a value combines or moves the lanes' values.
std::string FindLaneValues(const Computation& c, const Match& m, const std::unordered_set<const Instruction*>& output_parts,
                           std::unordered_set<const Instruction*>& lane_values, bool root_too = false) {
  LaneDims lane_dims;
  const Instruction* root = c.root();
  for (const Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kGetTupleElement && i->operand(0)->opcode() == Opcode::kParameter) {
      if (std::find(m.lane.begin(), m.lane.end(), i->tuple_index()) != m.lane.end()) {
        lane_values.insert(i);
        lane_dims[i] = NonUnitDims(i->shape());
      }
      continue;
    }
    if ((i == root && !root_too) || i->opcode() == Opcode::kParameter) continue;
    bool lane = false;
    for (const Instruction* op : i->operands()) lane = lane || lane_values.count(op);
    if (!lane) continue;
    std::optional<std::vector<int64_t>> dims;
    bool reduced_output = false;
    for (const Output& o : m.reductions) reduced_output = reduced_output || i == o.value;
    if (output_parts.count(i)) {
      dims = std::vector<int64_t>{};
    } else if (reduced_output) {
      // A reduction over the lanes combined after the loop: the step itself must not read
      // it (a carry computed from it would see one lane's values: wrong results, seed
      // 10166 of the loop gradient fuzzer).
      bool only_output = true;
      for (const Instruction* u : i->users()) only_output = only_output && output_parts.count(u);
      if (only_output && SameLanes(i->operand(0)->shape().dims(), m.lanes)) dims = std::vector<int64_t>{};
    } else if (i->shape().IsArray()) {
      dims = LaneDimsOf(i, lane_dims);
    }
    if (!dims) {
      return std::string(OpcodeName(i->opcode())) + " " + Name(i) + " (" + i->shape().ToString() +
             ") combines or moves the lanes' values: a step is not elementwise over " +
             Shape(i->shape().IsArray() ? i->dtype() : DType::kF32, m.lanes).ToString();
    }
    lane_dims[i] = *dims;
    lane_values.insert(i);
  }
  return "";
}

// Whether `a` (in a loop's condition) and `b` (in its body) compute the same value from the
// loop's state: the same ops over the same state elements (or invariant elements that start
// from the same value), constants and operands alike.
bool SameStateValue(const Instruction* a, const Instruction* b, const Instruction* loop,
                    std::unordered_map<const Instruction*, const Instruction*>& same) {
  auto it = same.find(a);
  if (it != same.end()) return it->second == b;
  bool equal = false;
  auto state_element = [](const Instruction* i) {
    return i->opcode() == Opcode::kGetTupleElement && i->operand(0)->opcode() == Opcode::kParameter;
  };
  if (state_element(a) || state_element(b)) {
    if (state_element(a) && state_element(b)) {
      int64_t j = a->tuple_index(), k = b->tuple_index();
      const Instruction* body_root = loop->while_body()->root();
      const Instruction* init = loop->operand(0);
      auto invariant = [&](int64_t e) { return IsParamElement(body_root->operand(static_cast<int>(e)), e); };
      equal = j == k || (invariant(j) && invariant(k) && init->operand(static_cast<int>(j)) == init->operand(static_cast<int>(k)));
    }
  } else if (a->opcode() != Opcode::kParameter && a->IdenticalIgnoringOperands(*b) && a->operand_count() == b->operand_count()) {
    equal = true;
    for (int k = 0; k < a->operand_count() && equal; ++k) equal = SameStateValue(a->operand(k), b->operand(k), loop, same);
  }
  same[a] = equal ? b : nullptr;
  return equal;
}

// Whether `cond` is "any lane's predicate holds": an or-reduction over all of a predicate.
bool IsAnyLane(const Instruction* any) {
  return any->opcode() == Opcode::kReduce && any->operand_count() == 2 && any->shape().IsScalar() &&
         any->to_apply()->root()->opcode() == Opcode::kOr && InitIsIdentity(any) &&
         static_cast<int>(any->dimensions().size()) == any->operand(0)->shape().rank();
}

// A while loop whose lanes stop one by one (ir/whole_loop.h): its condition is "any lane's
// predicate holds" (an or-reduction of a predicate of the lanes' shape over all of it), and
// its body leaves each lane whose predicate is false as it is (select(predicate, next,
// state) for every carry that changes). The lanes are then independent: each block of
// lanes may step until its own are done and end where the whole loop would.
Match MatchLaneWhile(const Instruction* loop) {
  Match m;
  m.until_done = true;
  const std::string no = "its trip count is not known when it starts (a while_loop, not a scan or fori_loop)";
  const Computation* body = loop->while_body();
  const Instruction* root = body->root();
  const Instruction* any = loop->while_condition()->root();
  if (root->opcode() != Opcode::kTuple || loop->operand(0)->opcode() != Opcode::kTuple) {
    m.why_not = no;
    return m;
  }
  if (!IsAnyLane(any)) {
    m.why_not = no;
    return m;
  }
  m.predicate = any->operand(0);
  m.lanes = m.predicate->shape().dims();
  std::unordered_map<const Instruction*, const Instruction*> same;
  for (int k = 0; k < root->operand_count(); ++k) {
    const Instruction* r = root->operand(k);
    if (IsParamElement(r, k)) {
      m.invariant.push_back(k);
      continue;
    }
    const Instruction* running = r->opcode() == Opcode::kSelect ? r->operand(0) : nullptr;
    if (running && running->opcode() == Opcode::kBroadcast) {
      if (!SameLanes(running->operand(0)->shape().dims(), running->shape().dims())) {
        m.why_not = no + ", and carry " + std::to_string(k) + " (" + r->shape().ToString() +
                    ") holds a row for each lane of the condition's predicate (" +
                    running->operand(0)->shape().ToString() + "): the lanes of a kernel are its elements";
        return m;
      }
      running = running->operand(0);
    }
    if (!running || !IsParamElement(r->operand(2), k) || !SameStateValue(m.predicate, running, loop, same)) {
      m.why_not = no + ", and its step changes carry " + std::to_string(k) +
                  " also where the condition's predicate is false (not select(predicate, next, carry))";
      return m;
    }
    if (!SameLanes(r->shape().dims(), m.lanes)) {
      m.why_not = no + ", and carry " + std::to_string(k) + " (" + r->shape().ToString() +
                  ") does not have the predicate's shape (" + Shape(DType::kPred, m.lanes).ToString() + ")";
      return m;
    }
    m.lane.push_back(k);
  }
  if (m.lane.empty()) {
    m.why_not = no;
    return m;
  }
  for (const Computation* c : {body, static_cast<const Computation*>(loop->while_condition())}) {
    std::string part = c == body ? "body" : "condition";
    m.why_not = UnfusibleOp(*c, part);
    if (!m.why_not.empty()) return m;
    std::unordered_set<const Instruction*> lane_values;
    m.why_not = FindLaneValues(*c, m, {}, lane_values);
    if (!m.why_not.empty()) return m;
  }
  return m;
}


Match MatchLoop(const Instruction* loop) {
  Match m;
  std::optional<CountedLoop> counted = MatchCountedLoop(loop);
  const Instruction* until = loop->while_condition()->root();
  if (counted) {
    m.counted = *counted;
    if (counted->trip_count < 2) {
      m.why_not = "it runs fewer than two steps";
      return m;
    }
  } else if (!IsAnyLane(until) && until->shape().IsArray() && until->dtype() == DType::kPred &&
             until->shape().NumElements() == 1) {
    // A condition of one value (a fori_loop to a bound known only when it runs, a loop
    // over one lane): every block of lanes computes it alike and steps as often.
    m.until_done = true;
    m.predicate = until;
    m.counted.counter = -1;
  } else {
    return MatchLaneWhile(loop);
  }
  const Computation* body = loop->while_body();
  const Instruction* root = body->root();
  if (root->opcode() != Opcode::kTuple || loop->operand(0)->opcode() != Opcode::kTuple) {
    m.why_not = "its state is not a tuple of arrays";
    return m;
  }
  m.why_not = UnfusibleOp(*body, "body");
  if (!m.why_not.empty()) return m;
  int n = root->operand_count();
  std::vector<int> carries;
  std::unordered_set<const Instruction*> output_parts;  // output DUSes and their updates
  for (int k = 0; k < n; ++k) {
    if (k == m.counted.counter) continue;
    Instruction* r = root->operand(k);
    if (IsParamElement(r, k)) {
      m.invariant.push_back(k);
      continue;
    }
    if (r->opcode() == Opcode::kDynamicUpdateSlice && IsParamElement(r->operand(0), k) && m.until_done) {
      m.why_not = "its trip count is not known when it starts, and it writes output " + std::to_string(k) + " a row per step";
      return m;
    }
    if (r->opcode() == Opcode::kDynamicUpdateSlice && IsParamElement(r->operand(0), k)) {
      if (r->operand(0)->user_count() != 1) {
        m.why_not = "its stacked output " + std::to_string(k) + " is read inside the loop";
        return m;
      }
      Instruction* update = r->operand(1);
      bool zeros = true;
      for (int s = 3; s < r->operand_count(); ++s) zeros = zeros && IntegerConstant(r->operand(s)) == 0;
      if (update->opcode() != Opcode::kReshape || !zeros || update->shape().rank() < 1 || update->shape().dim(0) != 1) {
        m.why_not = "output " + std::to_string(k) + " is not written one row per step";
        return m;
      }
      Instruction* value = update->operand(0);
      std::vector<int64_t> row_dims(update->shape().dims().begin() + 1, update->shape().dims().end());
      output_parts.insert(r);
      output_parts.insert(update);
      if (value->opcode() == Opcode::kReduce && value->shape().rank() == 0 &&
          static_cast<int>(value->dimensions().size()) == value->operand(0)->shape().rank()) {
        m.reductions.push_back({k, value, r->operand(2)});
      } else if (value->shape().dims() == row_dims) {
        m.lane_outputs.push_back({k, value, r->operand(2)});
      } else {
        m.why_not = "output " + std::to_string(k) + " is not written one row per step";
        return m;
      }
      continue;
    }
    carries.push_back(k);
  }
  // The lanes: the largest carry or output value; of values of one element (a single
  // environment), the one of highest rank, so that a [1] state is the lane and a scalar
  // counter beside it is not.
  auto consider = [&](const Shape& s) {
    int64_t have = Shape(s.dtype(), m.lanes).NumElements();
    if (m.lanes.empty() || s.NumElements() > have ||
        (s.NumElements() == have && s.rank() > static_cast<int>(m.lanes.size()))) {
      m.lanes = s.dims();
    }
  };
  for (int k : carries) consider(root->operand(k)->shape());
  for (const Output& o : m.lane_outputs) consider(o.value->shape());
  for (const Output& o : m.reductions) consider(o.value->operand(0)->shape());
  if (carries.empty() && m.lane_outputs.empty() && m.reductions.empty()) {
    m.why_not = "it computes nothing per step";
    return m;
  }
  // Every step writes each output's row (or reduces a value) over the lanes, whether or not
  // it depends on a lane carry: outputs of another size would need their own index space.
  auto other_lanes = [&](const Output& o, const Shape& s) {
    if (SameLanes(s.dims(), m.lanes)) return false;
    m.why_not = "output " + std::to_string(o.element) + " (" + s.ToString() + " per step) does not have the lanes' shape (" +
                Shape(s.dtype(), m.lanes).ToString() + ")";
    return true;
  };
  for (const Output& o : m.lane_outputs) {
    if (other_lanes(o, o.value->shape())) return m;
  }
  for (const Output& o : m.reductions) {
    if (other_lanes(o, o.value->operand(0)->shape())) return m;
  }
  // With one lane every one-element value has the lanes' non-unit dimensions (none): only
  // carries of the lanes' exact shape are lanes there, the others are uniform.
  const bool one_lane = Shape(DType::kF32, m.lanes).NumElements() == 1;
  for (int k : carries) {
    const Shape& s = root->operand(k)->shape();
    if (one_lane ? s.dims() == m.lanes : SameLanes(s.dims(), m.lanes)) {
      m.lane.push_back(k);
    } else if (s.NumElements() <= kMaxUniformElements) {
      m.uniform.push_back(k);
    } else {
      m.why_not = "carry " + std::to_string(k) + " (" + s.ToString() + ") is neither a lane array (" +
                  Shape(s.dtype(), m.lanes).ToString() + ") nor small";
      return m;
    }
  }
  // Which values depend on the lanes, and where their lane dimensions are: a step may give
  // each lane a small row of its own (a stack of its state, a matrix product with loop-invariant
  // weights, a reduction or argmax over the row), as long as no op moves values between lanes.
  std::unordered_set<const Instruction*> lane_values;
  m.why_not = FindLaneValues(*body, m, output_parts, lane_values);
  if (!m.why_not.empty()) return m;
  for (int k : m.uniform) {
    if (lane_values.count(root->operand(k))) {
      m.why_not = "the next value of carry " + std::to_string(k) + " depends on every lane";
      return m;
    }
  }
  for (const std::vector<Output>* outs : {&m.lane_outputs, &m.reductions}) {
    for (const Output& o : *outs) {
      if (lane_values.count(o.row)) {
        m.why_not = "output " + std::to_string(o.element) + "'s row depends on the lanes";
        return m;
      }
    }
  }
  for (const Output& o : m.reductions) {
    if (!InitIsIdentity(o.value)) {
      m.why_not = "reduction " + Name(o.value) + " does not start from its combiner's identity";
      return m;
    }
  }
  if (m.until_done) {
    // Its condition: every block of lanes must compute the same value, so only from the
    // uniform carries and the invariants (or from the one lane there is).
    const Computation& cond = *loop->while_condition();
    m.why_not = UnfusibleOp(cond, "condition");
    if (!m.why_not.empty()) return m;
    std::unordered_set<const Instruction*> cond_lanes;
    std::string mixes = FindLaneValues(cond, m, {}, cond_lanes, /*root_too=*/true);
    if (!mixes.empty()) {
      m.why_not = "its trip count is not known when it starts, and in its condition " + mixes;
      return m;
    }
    bool one_lane = Shape(DType::kF32, m.lanes).NumElements() == 1;
    if (!one_lane && cond_lanes.count(m.predicate)) {
      m.why_not = "its trip count is not known when it starts, and its condition " + Name(m.predicate) +
                  " depends on the lanes' values";
      return m;
    }
  }
  return m;
}

// `block_lanes`: lanes per block of partial results (0: chosen from the lanes).
void Fuse(Instruction* loop, const Match& m, int64_t block_lanes) {
  Computation* parent = loop->parent();
  Module* module = parent->parent();
  const Instruction* init = loop->operand(0);
  const Computation* body = loop->while_body();
  const Instruction* root = body->root();

  Computation* step = module->AddComputation("whole_loop_step");
  Builder sb(step);
  int number = 0;
  std::vector<Instruction*> elems(root->operand_count(), nullptr);
  std::vector<Instruction*> operands;
  for (const std::vector<int>* group : {&m.lane, &m.uniform, &m.invariant}) {
    for (int k : *group) {
      elems[k] = sb.Parameter(number++, init->operand(k)->shape(), "p" + std::to_string(k));
      operands.push_back(init->operand(k));
    }
  }
  // The counter's value in the step (a loop until its lanes are done has none: the step
  // does not read this parameter).
  if (m.until_done) {
    sb.Parameter(number++, Shape(DType::kS32, {}), "counter");
  } else {
    elems[m.counted.counter] = sb.Parameter(number++, init->operand(m.counted.counter)->shape(), "counter");
  }
  for (const std::vector<Output>* outs : {&m.lane_outputs, &m.reductions}) {
    for (const Output& o : *outs) {
      // Stacked outputs are written by the kernel, never read: a placeholder.
      const Shape& s = init->operand(o.element)->shape();
      elems[o.element] = sb.Broadcast(sb.ScalarConstant(s.dtype(), 0), s.dims(), {});
    }
  }
  std::unordered_map<const Instruction*, Instruction*> map;
  Instruction* state = sb.Tuple(elems);
  InlineComputation(*body, step, {state}, &map);
  std::unordered_map<const Instruction*, Instruction*> cond_map;
  if (m.until_done) InlineComputation(*loop->while_condition(), step, {state}, &cond_map);
  std::vector<Instruction*> roots;
  for (int k : m.lane) roots.push_back(map.at(root->operand(k)));
  for (int k : m.uniform) roots.push_back(map.at(root->operand(k)));
  auto row = [&](const Output& o) {
    Instruction* r = map.at(o.row);
    return r->dtype() == DType::kS32 ? r : sb.Convert(r, DType::kS32);
  };
  for (const Output& o : m.lane_outputs) {
    roots.push_back(map.at(o.value));
    roots.push_back(row(o));
  }
  for (const Output& o : m.reductions) {
    roots.push_back(map.at(o.value));
    roots.push_back(row(o));
  }
  if (m.until_done) {
    // The lanes' predicate of their shape, or one value for all.
    Instruction* running = cond_map.at(m.predicate);
    std::vector<int64_t> dims = running->shape().NumElements() == 1 && Shape(DType::kF32, m.lanes).NumElements() > 1
                                    ? std::vector<int64_t>{}
                                    : root->operand(m.lane[0])->shape().dims();
    roots.push_back(running->shape().dims() == dims ? running : sb.Reshape(running, dims));
  }
  step->set_root(sb.Tuple(roots));
  // The body read its state through get-tuple-element of the tuple built above: read the
  // elements directly, and drop what only the stacked outputs' placeholders used.
  for (Instruction* i : step->MakePostOrder()) {
    if (i->opcode() == Opcode::kGetTupleElement && i->operand(0)->opcode() == Opcode::kTuple) {
      i->ReplaceAllUsesWith(i->operand(0)->operand(static_cast<int>(i->tuple_index())));
    }
  }
  std::vector<Instruction*> order = step->MakePostOrder();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if ((*it)->users().empty() && *it != step->root() && (*it)->opcode() != Opcode::kParameter) step->RemoveInstruction(*it);
  }

  int64_t lanes = Shape(DType::kF32, m.lanes).NumElements();
  int64_t block = m.reductions.empty() ? std::max<int64_t>(lanes, 1)
                 : block_lanes > 0      ? block_lanes
                                        : std::max<int64_t>(16, ((lanes + 31) / 32 + 15) / 16 * 16);
  InstructionAttrs attrs;
  attrs.fusion_kind = FusionKind::kWholeLoop;
  attrs.trip_count = m.until_done ? -1 : m.counted.trip_count;
  attrs.index = m.until_done ? 0 : m.counted.start;
  attrs.dimensions = {static_cast<int64_t>(m.lane.size()), static_cast<int64_t>(m.uniform.size()),
                      static_cast<int64_t>(m.lane_outputs.size()), static_cast<int64_t>(m.reductions.size()), block};
  Builder pb(parent);
  Instruction* fusion = pb.Add(Opcode::kFusion, operands, attrs, {step}, nullptr, "whole_loop_fusion");
  fusion->set_metadata(loop->metadata());
  step->set_name(module->UniqueComputationName("fused_" + fusion->name()));

  // The loop's results, from the kernel's outputs.
  std::vector<Instruction*> users = loop->users();
  for (Instruction* u : users) {
    FJ_CHECK(u->opcode() == Opcode::kGetTupleElement, "a whole-loop candidate's state is read whole");
    int k = static_cast<int>(u->tuple_index());
    Instruction* value = nullptr;
    int index = 0;
    auto find = [&](const std::vector<int>& group, int base) {
      auto it = std::find(group.begin(), group.end(), k);
      if (it != group.end()) index = base + static_cast<int>(it - group.begin());
      return it != group.end();
    };
    int lane_n = static_cast<int>(m.lane.size()), uni_n = static_cast<int>(m.uniform.size());
    int out_n = static_cast<int>(m.lane_outputs.size());
    if (find(m.lane, 0) || find(m.uniform, lane_n)) {
      value = pb.GetTupleElement(fusion, index);
    } else if (std::find(m.invariant.begin(), m.invariant.end(), k) != m.invariant.end()) {
      value = init->operand(k);
    } else if (!m.until_done && k == m.counted.counter) {
      value = pb.ScalarConstant(u->dtype(), static_cast<double>(m.counted.start + m.counted.trip_count));
    } else {
      for (int j = 0; j < out_n && !value; ++j) {
        if (m.lane_outputs[j].element == k) value = pb.GetTupleElement(fusion, lane_n + uni_n + j);
      }
      for (size_t j = 0; j < m.reductions.size() && !value; ++j) {
        const Instruction* reduce = m.reductions[j].value;
        if (m.reductions[j].element != k) continue;
        Instruction* partials = pb.GetTupleElement(fusion, lane_n + uni_n + out_n + static_cast<int>(j));
        Literal identity = reduce->operand(1)->literal();
        value = pb.Reduce(partials, pb.Constant(std::move(identity)), {0}, reduce->to_apply());
        // A step's reduction kept as [1] (keepdims) stacks to [T, 1].
        if (value->shape().dims() != u->shape().dims()) value = pb.Reshape(value, u->shape().dims());
      }
    }
    FJ_CHECK(value, "whole-loop fusion: no value for state element ", k);
    if (!u->metadata().empty() && value->metadata().empty()) value->set_metadata(u->metadata());
    u->ReplaceAllUsesWith(value);
    parent->RemoveInstruction(u);
  }
  parent->RemoveInstruction(loop);
}

}  // namespace

std::string WholeLoopRefusal(const Instruction* loop) { return MatchLoop(loop).why_not; }

bool WholeLoopFusionPass::Run(Module& module) {
  if (!profile_.enabled || !profile_.whole_loop) return false;
  bool changed = false;
  std::vector<Instruction*> loops;
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* i : c->MakePostOrder()) {
      if (i->opcode() == Opcode::kWhile) loops.push_back(i);
    }
  }
  for (Instruction* loop : loops) {
    bool whole_state_read = loop->IsRoot();
    for (const Instruction* u : loop->users()) whole_state_read = whole_state_read || u->opcode() != Opcode::kGetTupleElement;
    Match m = MatchLoop(loop);
    if (m.why_not.empty() && whole_state_read) m.why_not = "its state is read as a whole after it";
    int64_t trips = m.counted.trip_count;
    if (!m.why_not.empty()) {
      if (log_) log_->Record("whole-loop-fusion", loop, loop, FusionDecision::No("whole-loop", "loop " + Name(loop) + " runs step by step: " + m.why_not));
      continue;
    }
    auto count = [](size_t n, const std::string& one, const std::string& many) {
      return std::to_string(n) + " " + (n == 1 ? one : many);
    };
    int64_t lanes = Shape(DType::kF32, m.lanes).NumElements();
    std::string lanes_text = (lanes == 1 ? std::string("its one lane") : "each of the " + std::to_string(lanes) + " lanes") +
                             (m.lanes.size() > 1 ? " (" + DimsToString(m.lanes) + ")" : "");
    bool condition_once = m.until_done && m.predicate == loop->while_condition()->root();
    std::string reason = condition_once && lanes == 1
        ? "the loop runs in one kernel: its one lane keeps its " + count(m.lane.size(), "carry", "carries") +
          " in registers and tests the condition before each step"
        : condition_once
        ? "the loop runs in one kernel: its condition is the same for every lane (computed from " +
          count(m.uniform.size(), "uniform carry", "uniform carries") + " and the invariants), tested in the kernel "
          "before each step; " + lanes_text + " keeps its " + count(m.lane.size(), "carry", "carries") + " in registers"
        : m.until_done
        ? "the loop runs in one kernel: its lanes stop one by one (a step leaves a lane whose predicate is false as it "
          "is), so each block of lanes steps until its own are done; " + lanes_text + " keeps its " +
          count(m.lane.size(), "carry", "carries") + " in registers"
        : "the loop's " + std::to_string(trips) + " steps run in one kernel: " + lanes_text + " keeps its " +
          count(m.lane.size(), "carry", "carries") + " in registers for all steps";
    if (!m.reductions.empty()) {
      reason += ", and " + count(m.reductions.size(), "per-step reduction", "per-step reductions") + (m.reductions.size() == 1 ? " is" : " are") +
                " summed per block of lanes";
    }
    if (log_) log_->Record("whole-loop-fusion", loop, loop, FusionDecision::Yes("whole-loop", reason));
    Fuse(loop, m, block_lanes_);
    changed = true;
  }
  return changed;
}

}  // namespace fj
