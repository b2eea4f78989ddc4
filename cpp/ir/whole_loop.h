// The layout of a whole-loop fusion (FusionKind::kWholeLoop, beyond XLA): a counted loop
// whose every step is elementwise over one index space, the lanes (of shape S), run as one
// kernel that keeps each lane's state in registers for all steps.
//
// Its fused computation is one step. Parameters: the lane carries (each of shape S), the
// uniform carries (small arrays the same for every lane, e.g. a PRNG key: every lane block
// computes their sequence itself), the loop-invariant values (any shape, read from
// memory), and last the step's counter value (an integer scalar: start + t in step t).
// Root tuple: the lane carries' and the uniform carries' next values; for each per-lane
// output (a [T] + S array) its value in this step (S) and the row it goes to (s32[]); for
// each per-step reduction over the lanes (a [T] array) the reduce of S to a scalar and its
// row. Attributes: trip_count = T, index = the counter's start, dimensions = {lane carries,
// uniform carries, lane outputs, reductions, lanes per block}.
//
// A loop whose lanes stop one by one (trip_count = -1; what vmap makes of a while_loop
// whose trip count differs per example): the loop ran while any lane's predicate held, and
// a step leaves a lane whose predicate is false as it is. Each block of lanes then steps
// until its own lanes are done. Its step has lane carries and invariants only, and one
// more root, last: the predicate (pred of shape S) of the state the step starts from. Or a
// while loop whose condition is one value computed alike by every block of lanes (from the
// uniform carries and the invariants: a fori_loop to a bound known when it runs): the same
// layout with a scalar predicate, and uniform carries allowed.
//
// Operands: the carries' initial values, then the invariants. Outputs: the carries' final
// values, the per-lane outputs ([T] + S), and for each reduction its partial results per
// block of lanes ([blocks, T], blocks = ceil(lanes / lanes per block)): a reduce over the
// blocks, in order, combines them, so the sums do not depend on how threads split lanes.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/instruction.h"

namespace fj {

struct WholeLoopLayout {
  int carries = 0;          // lane carries
  int uniform_carries = 0;
  int lane_outputs = 0;
  int reductions = 0;
  int64_t block_lanes = 1;  // lanes per block (a multiple of 16 when there are reductions)
  int64_t blocks = 1;
  int64_t trip_count = 0;  // -1: until every lane's predicate is false
  int64_t start = 0;
  int predicate = -1;       // that predicate's position in the step's root tuple, or -1
  int invariants = 0;
  std::vector<int64_t> lanes;  // S
};

// The layout of a kWholeLoop fusion instruction, from its attributes and computation.
WholeLoopLayout GetWholeLoopLayout(const InstructionAttrs& attrs, const Computation& step);

// The outputs of such a fusion (see above).
Shape WholeLoopShape(const InstructionAttrs& attrs, const Computation& step);

// Lane dimensions: a value computed in a step may give each lane a small row of its own (a
// stack of its state, a matrix product with weights the same for all lanes, an argmax over
// the row) as long as no op moves values between lanes. These are, for each value that
// depends on the lanes, the positions of the lanes' (non-unit) dimensions in its shape.
using LaneDims = std::unordered_map<const Instruction*, std::vector<int64_t>>;

std::vector<int64_t> NonUnitDims(const Shape& s);

// The lane dimensions of `i`'s result, from those of its operands in `known` (the operands
// that depend on the lanes), or nothing if `i` mixes lanes: reads another lane's values,
// reduces, contracts or slices across lanes, or reshapes them other than by unit dimensions.
std::optional<std::vector<int64_t>> LaneDimsOf(const Instruction* i, const LaneDims& known);

// The lane dimensions of every value of a whole-loop step (`step`, of `fusion`) that depends
// on its lane carries.
LaneDims StepLaneDims(const InstructionAttrs& attrs, const Computation& step);

}  // namespace fj
