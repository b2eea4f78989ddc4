// Loop analysis: recognising counted while loops (what lax.scan and fori_loop lower to).
#pragma once

#include <cstdint>
#include <optional>

#include "ir/instruction.h"

namespace fj {

// A while loop whose state element `counter` starts at the constant `start`, is
// incremented by one in each iteration, and is compared against the constant `limit`:
// the loop runs trip_count = max(0, limit - start) times.
struct CountedLoop {
  int counter = -1;
  int64_t start = 0;
  int64_t limit = 0;
  int64_t trip_count = 0;
};

// The loop's counter, if it has one (matched on unfused IR).
std::optional<CountedLoop> MatchCountedLoop(const Instruction* loop);

// The integer value of a scalar integer constant, if `instr` is one.
std::optional<int64_t> IntegerConstant(const Instruction* instr);

}  // namespace fj
