// Counted-loop matching (see loop_analysis.h).
#include "analysis/loop_analysis.h"

#include <algorithm>

#include "ir/computation.h"

namespace fj {

std::optional<int64_t> IntegerConstant(const Instruction* instr) {
  if (instr->opcode() != Opcode::kConstant || !instr->shape().IsArray() || instr->shape().NumElements() != 1 ||
      !IsInteger(instr->dtype())) {
    return std::nullopt;
  }
  const Literal& lit = instr->literal();
  return lit.GetInt64(0);
}

namespace {

// GTE(param, k) of the computation's only parameter: k, else -1.
int ParamElement(const Instruction* i) {
  if (i->opcode() != Opcode::kGetTupleElement || i->operand(0)->opcode() != Opcode::kParameter) return -1;
  return static_cast<int>(i->tuple_index());
}

}  // namespace

std::optional<CountedLoop> MatchCountedLoop(const Instruction* loop) {
  if (loop->opcode() != Opcode::kWhile) return std::nullopt;
  const Instruction* init = loop->operand(0);
  const Instruction* cond = loop->while_condition()->root();
  const Instruction* next = loop->while_body()->root();
  if (init->opcode() != Opcode::kTuple || next->opcode() != Opcode::kTuple) return std::nullopt;
  if (cond->opcode() != Opcode::kCompare) return std::nullopt;
  // counter < limit, or limit > counter.
  int counter = -1;
  std::optional<int64_t> limit;
  if (cond->direction() == ComparisonDirection::kLt) {
    counter = ParamElement(cond->operand(0));
    limit = IntegerConstant(cond->operand(1));
  } else if (cond->direction() == ComparisonDirection::kGt) {
    counter = ParamElement(cond->operand(1));
    limit = IntegerConstant(cond->operand(0));
  }
  if (counter < 0 || !limit || counter >= init->operand_count()) return std::nullopt;
  std::optional<int64_t> start = IntegerConstant(init->operand(counter));
  if (!start) return std::nullopt;
  // next counter = counter + 1
  const Instruction* inc = next->operand(counter);
  if (inc->opcode() != Opcode::kAdd) return std::nullopt;
  bool ok = (ParamElement(inc->operand(0)) == counter && IntegerConstant(inc->operand(1)) == 1) ||
            (ParamElement(inc->operand(1)) == counter && IntegerConstant(inc->operand(0)) == 1);
  if (!ok) return std::nullopt;
  CountedLoop c;
  c.counter = counter;
  c.start = *start;
  c.limit = *limit;
  c.trip_count = std::max<int64_t>(0, *limit - *start);
  return c;
}

}  // namespace fj
