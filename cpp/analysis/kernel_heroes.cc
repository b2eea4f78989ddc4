// Kernel heroes (see kernel_heroes.h).
#include "analysis/kernel_heroes.h"

#include <unordered_set>

#include "analysis/cost_model.h"
#include "support/target.h"

namespace fj {
namespace {

// Whether every reduction of `ops` over its last dimension combines fewer than `width`
// elements along it: EmitReduce then combines them one by one, whatever the output's lanes.
bool ReductionsShorterThan(const std::vector<const Instruction*>& ops, int width) {
  for (const Instruction* i : ops) {
    if (IsRowReduction(i) && i->operand(0)->shape().dims().back() >= width) return false;
  }
  return true;
}

// Whether a row-reduction kernel does more per element than a load and an add: a costly
// op (a division, a square root, a transcendental), or a max/min (a compare, a select and
// a NaN test per element). Only then do rows copied into lanes element by element
// (RowCopy::kElementwise) pay for their copies (a row sum of 10 columns: about as fast
// either way; logsumexp over [65536, 10]: 1.4 ms -> 0.23 ms).
bool WorthLanes(const std::vector<const Instruction*>& ops) {
  for (const Instruction* i : ops) {
    if (ElementCost(*i) >= 4) return true;
    if (i->opcode() == Opcode::kReduce) {
      Opcode combiner = i->to_apply()->root()->opcode();
      if (combiner == Opcode::kMaximum || combiner == Opcode::kMinimum) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<const Instruction*> KernelRoots(const Computation& fused) {
  const Instruction* root = fused.root();
  if (root->opcode() == Opcode::kTuple) return {root->operands().begin(), root->operands().end()};
  return {root};
}

bool IsReduction(const Instruction* instr) {
  Opcode op = instr->opcode();
  return op == Opcode::kReduce || op == Opcode::kArgMax || op == Opcode::kArgMin;
}

bool IsRowReduction(const Instruction* instr) {
  if (instr->opcode() != Opcode::kReduce || instr->dimensions().empty()) return false;
  return instr->dimensions().back() == instr->operand(0)->shape().rank() - 1;
}

const Instruction* ReductionHero(const Computation& fused, bool (*is_hero)(const Instruction*)) {
  for (const Instruction* r : KernelRoots(fused)) {
    const Instruction* x = r;
    while (!is_hero(x) && IsElementwise(x->opcode()) && x->opcode() != Opcode::kParameter) {
      // Follow the operand that has the root's shape (an epilogue keeps the output shape).
      const Instruction* next = nullptr;
      for (const Instruction* op : x->operands()) {
        if (op->shape().IsArray() && op->shape().SameDims(x->shape()) &&
            op->opcode() != Opcode::kParameter && op->opcode() != Opcode::kConstant) {
          next = op;
          if (is_hero(op)) break;
        }
      }
      if (!next) break;
      x = next;
    }
    if (is_hero(x)) return x;
  }
  return nullptr;
}

const Instruction* SideOutputHero(const Computation& fused) {
  const Instruction* hero = ReductionHero(fused, IsReduce);
  if (!hero || hero->dimensions().empty()) return nullptr;
  const Shape& in = hero->operand(0)->shape();
  const std::vector<int64_t>& rdims = hero->dimensions();
  for (size_t k = 0; k < rdims.size(); ++k) {
    if (rdims[rdims.size() - 1 - k] != in.rank() - 1 - static_cast<int64_t>(k)) return nullptr;
  }
  bool side = false;
  for (const Instruction* r : KernelRoots(fused)) {
    if (r->shape().SameDims(hero->shape())) continue;
    if (r->shape().NumElements() != in.NumElements()) return nullptr;
    side = true;
  }
  return side ? hero : nullptr;
}

const Shape& KernelShape(const Computation& fused) {
  const Instruction* hero = SideOutputHero(fused);
  return hero ? hero->shape() : KernelRoots(fused)[0]->shape();
}

const Shape* RowSpace(const Computation& fused) {
  const Instruction* hero = SideOutputHero(fused);
  const Shape& shape = hero ? hero->shape() : KernelRoots(fused)[0]->shape();
  if (!hero && shape.IsArray() && shape.rank() == 1) {
    // Rows reduced one output at a time: the row reduction the kernel is built around.
    const Instruction* row = ReductionHero(fused, IsReduce);
    if (!row || !IsRowReduction(row)) {
      row = nullptr;
      for (const Instruction* r : KernelRoots(fused)) {
        if (!row && IsReduce(r) && IsRowReduction(r)) row = r;
      }
    }
    for (const Instruction* r : KernelRoots(fused)) {
      if (!r->shape().SameDims(shape)) return nullptr;
    }
    bool one_dim = row && row->dimensions().size() == 1 && row->shape().SameDims(shape);
    return one_dim ? &row->operand(0)->shape() : nullptr;
  }
  if (!shape.IsArray() || shape.rank() < 2) return nullptr;
  for (const Instruction* r : KernelRoots(fused)) {
    bool side = hero && !r->shape().SameDims(shape);
    if (!side && !r->shape().SameDims(shape)) return nullptr;
  }
  return &shape;
}

bool IsFlatFrom(const Instruction* root, int64_t elements) {
  std::vector<const Instruction*> work = {root};
  std::unordered_set<const Instruction*> seen;
  while (!work.empty()) {
    const Instruction* i = work.back();
    work.pop_back();
    if (!seen.insert(i).second) continue;
    bool descend = true;
    switch (i->opcode()) {
      case Opcode::kParameter:
        if (i->shape().NumElements() != elements && i->shape().NumElements() != 1) return false;
        if (i->shape().NumElements() == 1 && elements != 1) {
          // A scalar parameter may be read only through a broadcast.
          for (const Instruction* u : i->users()) {
            if (u->opcode() != Opcode::kBroadcast && seen.count(u)) return false;
          }
        }
        break;
      case Opcode::kConstant:
        if (i->shape().NumElements() != 1 && i->shape().NumElements() != elements) return false;
        break;
      case Opcode::kReshape:
      case Opcode::kTuple:
        break;
      case Opcode::kBroadcast:
        if (i->operand(0)->shape().NumElements() != 1) return false;
        descend = true;
        break;
      case Opcode::kIota:
        if (i->shape().rank() != 1) return false;
        break;
      default:
        if (!IsElementwise(i->opcode())) return false;
        if (i->shape().IsArray() && i->shape().NumElements() != elements &&
            i->shape().NumElements() != 1) {
          return false;
        }
    }
    if (descend) {
      for (const Instruction* op : i->operands()) work.push_back(op);
    }
  }
  return true;
}

bool IsFlat(const Computation& c, int64_t elements) {
  for (const Instruction* r : KernelRoots(c)) {
    if (!IsFlatFrom(r, elements)) return false;
  }
  return true;
}

namespace {

// The operands of a kernel walking rows in lanes that are copied into them: those of the
// output's leading dimensions and a short last one (codegen's stage_operands).
std::vector<const Instruction*> Staged(const std::vector<const Instruction*>& params,
                                       const std::vector<int64_t>& leading, int lanes) {
  std::vector<const Instruction*> staged;
  for (const Instruction* p : params) {
    const std::vector<int64_t>& d = p->shape().dims();
    if (p->shape().IsArray() && d.size() == leading.size() + 1 && std::equal(leading.begin(), leading.end(), d.begin()) &&
        d.back() < lanes) {
      staged.push_back(p);
    }
  }
  return staged;
}

// Counts `value`'s elements as copied into lanes or out of them.
void Copy(const Instruction* value, int max_width, ShortRows& walk) {
  const Shape& s = value->shape();
  RowCopy how = HowRowsCopy(s.dims().back(), max_width, DTypeBytes(s.dtype()));
  walk.copied[static_cast<int>(how)] += static_cast<double>(s.NumElements());
}

// Rows of `length` walked in vectors of `width` along them: each row's tail one at a time.
ShortRows VectorsAlongRows(int64_t length, int width) {
  ShortRows walk;
  if (length > 0) walk.scalar_share = static_cast<double>(length % width) / static_cast<double>(length);
  return walk;
}

}  // namespace

int RowCopyVectorLanes(int max_width, int element_bytes) {
  return std::min(ShortRowLanes(max_width), max_width * 4 / element_bytes);
}

RowCopy HowRowsCopy(int64_t length, int max_width, int element_bytes) {
  const int piece = RowCopyVectorLanes(max_width, element_bytes);
  const bool transpose = piece == ShortRowLanes(max_width);
  if (piece > 1 && length <= (transpose ? 6 : 8)) return RowCopy::kShuffleTree;
  return transpose ? RowCopy::kTranspose : RowCopy::kElementwise;
}

ShortRows ShortRowWalk(const Instruction* kernel, int max_width) {
  ShortRows walk;
  if (max_width <= 1) return walk;  // a GPU thread computes one element
  const int lanes = ShortRowLanes(max_width);
  std::vector<const Instruction*> ops, roots, params;
  bool output_fusion = false;
  bool row_reduction = false;
  if (kernel->opcode() == Opcode::kFusion) {
    if (kernel->fusion_kind() == FusionKind::kWholeLoop) return walk;
    const Computation& c = *kernel->fused_computation();
    if (SideOutputHero(c)) return walk;
    roots = KernelRoots(c);
    if (roots.size() == 1 && roots[0]->opcode() == Opcode::kScatter) return walk;
    for (const Instruction* r : roots) {
      if (!r->shape().IsArray() || !r->shape().SameDims(roots[0]->shape())) return walk;  // by output
    }
    if (IsFlat(c, roots[0]->shape().NumElements())) return walk;
    ops = c.Instructions();  // (what follows looks for any op, in no order)
    params.assign(c.parameters().begin(), c.parameters().end());
    const Instruction* hero = ReductionHero(c, IsReduce);
    row_reduction = hero && IsRowReduction(hero);
    output_fusion = kernel->fusion_kind() == FusionKind::kOutput;
  } else if (IsRowReduction(kernel)) {  // a reduce of its own (wrapped in a fusion by codegen)
    ops = roots = {kernel};
    params.assign(kernel->operands().begin(), kernel->operands().end());
  } else {
    return walk;
  }
  const Shape& shape = roots[0]->shape();
  for (const Instruction* r : roots) row_reduction = row_reduction || IsRowReduction(r);
  if (shape.rank() == 0) return walk;
  int64_t reduced = 0;  // the longest row a reduction combines
  for (const Instruction* i : ops) {
    if (IsRowReduction(i)) reduced = std::max(reduced, i->operand(0)->shape().dims().back());
  }
  const bool short_reductions = ReductionsShorterThan(ops, lanes);
  const std::vector<int64_t>& dims = shape.dims();
  std::vector<int64_t> leading(dims.begin(), dims.end() - (shape.rank() == 1 ? 0 : 1));
  if (shape.rank() == 1) {
    // One output per row: the rows are the row reductions'.
    if (!row_reduction) return walk;
    walk.length = reduced;
    bool shuffled = true;  // every operand goes into lanes by shuffles
    for (const Instruction* p : Staged(params, leading, lanes)) {
      shuffled = shuffled && HowRowsCopy(p->shape().dims().back(), max_width, DTypeBytes(p->dtype())) !=
                                 RowCopy::kElementwise;
    }
    walk.in_lanes = short_reductions && (WorthLanes(ops) || shuffled) && dims[0] >= lanes;
  } else {
    walk.length = dims.back();
    int width = row_reduction || walk.length < max_width ? 1 : max_width;
    // A product with short rows (an RL policy's few logits) in narrower vectors.
    if (width == 1 && !row_reduction && output_fusion) {
      while (width * 2 <= std::min<int64_t>(walk.length, max_width)) width *= 2;
    }
    // (Rows of 8 to 15 on AVX2 have vectors along them, but a softmax's per-row reductions
    // still gain from 16 rows at a time: 2x.)
    bool per_row = false;
    for (const Instruction* i : ops) per_row = per_row || IsPerRowReduction(i, shape);
    bool lanes_fit = walk.length < lanes && (width == 1 || per_row);
    walk.in_lanes = lanes_fit && short_reductions && shape.NumElements() / std::max<int64_t>(walk.length, 1) >= lanes;
    if (!walk.in_lanes && !row_reduction && width > 1) return VectorsAlongRows(walk.length, width);
    if (!walk.in_lanes && !lanes_fit) walk.length = reduced;  // long output rows: the reductions' are what is short
  }
  if (!walk.in_lanes && !short_reductions) return VectorsAlongRows(reduced, max_width);
  // Not in lanes: one element at a time, every reduction being as short (rows shorter than
  // the lanes are combined in order, with vectors of 8 too: row sums over [104857, 10]
  // took as long on 8 lanes as on 16).
  walk.one_at_a_time = !walk.in_lanes;
  walk.scalar_share = walk.one_at_a_time ? 1.0 : 0.0;
  if (!walk.in_lanes) return walk;
  for (const Instruction* c : Staged(params, leading, lanes)) Copy(c, max_width, walk);
  if (shape.rank() >= 2) {
    for (const Instruction* r : roots) Copy(r, max_width, walk);
  }
  return walk;
}

bool ReadOnlyAtOwnPositions(const Instruction* value) {
  std::vector<const Instruction*> work = {value};
  while (!work.empty()) {
    const Instruction* v = work.back();
    work.pop_back();
    for (const Instruction* u : v->users()) {
      if (!IsElementwise(u->opcode()) || !u->shape().SameDims(value->shape())) return false;
      work.push_back(u);
    }
  }
  return true;
}

bool IsBlockTransposed(const Instruction* t) {
  if (t->opcode() != Opcode::kTranspose || !t->parent()->IsFusionComputation()) return false;
  const int bytes = DTypeBytes(t->dtype());
  const std::vector<int64_t>& perm = t->dimensions();
  const int rank = t->shape().rank();
  if (rank < 2 || (bytes != 4 && bytes != 8) || perm[rank - 2] != rank - 1 ||
      (rank > 2 && t->shape().dim(rank - 2) % kMaxBlockLanes != 0) || t->shape().dim(rank - 1) < kMaxBlockLanes) {
    return false;
  }
  const Computation& c = *t->parent();
  for (const Instruction* i : c.MakePostOrder()) {
    if (IsReduction(i) || i->opcode() == Opcode::kDot) return false;
  }
  for (const Instruction* r : KernelRoots(c)) {
    if (!r->shape().SameDims(t->shape())) return false;
  }
  std::vector<const Instruction*> work = {t};
  while (!work.empty()) {
    const Instruction* v = work.back();
    work.pop_back();
    for (const Instruction* u : v->users()) {
      if (u == c.root() && u->opcode() == Opcode::kTuple) continue;
      if (!IsElementwise(u->opcode()) || !u->shape().SameDims(t->shape())) return false;
      work.push_back(u);
    }
  }
  return true;
}

}  // namespace fj
