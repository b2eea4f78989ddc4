// Kernel plans (see kernel_emitter.h): how a fusion's output index space is walked.
#include <algorithm>
#include <unordered_set>

#include "analysis/buffer_assignment.h"
#include "analysis/cost_model.h"
#include "analysis/kernel_heroes.h"
#include "codegen/kernel_emitter.h"
#include "codegen/scatter_emitter.h"
#include "codegen/whole_loop_emitter.h"
#include "ir/computation.h"

namespace fj::codegen {
namespace {

// A block's lhs rows (bytes: about an L2 cache); the largest packed rhs panel and the
// largest buffer of waiting sums (stack buffers, as the row buffers:
// Target::max_kept_row_bytes); the fewest rows of a thread's chunk when panels are packed
// (each chunk packs every panel again: chunks of 16 rows made a 128 x 768 x 768 product on
// 2 threads 1.4x, not 1.9x, as fast as on one; 64 rows gave 256 x 4096 x 512 0.86x JAX's
// speed where 32 gave 0.78x).
constexpr int64_t kDotBlockBytes = 512 * 1024;
constexpr int64_t kDotPanelBytes = 64 * 1024;
constexpr int64_t kDotPartialBytes = 64 * 1024;
constexpr int64_t kDotChunkRows = 64;

// The product a kernel of `plan` is tiled around (DotTile), if it has one.
DotTile FindDotTile(const Computation& c, const KernelPlan& plan, const std::vector<const Instruction*>& roots) {
  DotTile tile;
  if (plan.mode != KernelPlan::Mode::kRows || plan.width < 2 || plan.side_hero || roots.size() != 1) return tile;
  const Instruction* root = roots[0];
  const Instruction* dot = nullptr;
  for (const Instruction* i : c.MakePostOrder()) {
    if (IsReduction(i)) return tile;
    if (i->opcode() != Opcode::kDot) continue;
    if (dot) return tile;
    dot = i;
  }
  if (!dot || IsPred(dot->dtype()) || !dot->shape().SameDims(root->shape())) return tile;
  const DotDims& dd = dot->attrs().dot;
  int rank = dot->shape().rank();
  int batch = rank - 2;
  if (rank < 2 || dot->operand(0)->shape().rank() != rank || dot->operand(1)->shape().rank() != rank) return tile;
  if (static_cast<int>(dd.lhs_batch.size()) != batch || static_cast<int>(dd.rhs_batch.size()) != batch) return tile;
  for (int k = 0; k < batch; ++k) {
    if (dd.lhs_batch[k] != k || dd.rhs_batch[k] != k) return tile;
  }
  const bool lhs_transposed = dd.lhs_contracting == std::vector<int64_t>{batch};
  if ((!lhs_transposed && dd.lhs_contracting != std::vector<int64_t>{batch + 1}) ||
      dd.rhs_contracting != std::vector<int64_t>{batch}) {
    return tile;
  }
  if (!ReadOnlyAtOwnPositions(dot)) return tile;
  // 4 x 4 zmm sums (plus the rhs vectors) fit AVX-512's 32 registers; 4 x 2 AVX2's 16;
  // rows one vector wide get 8 rows.
  tile.vectors = static_cast<int>(std::min<int64_t>(plan.width * DTypeBytes(dot->dtype()) >= 64 ? 4 : 2,
                                                    plan.row_length / plan.width));
  if (tile.vectors < 1) return tile;
  if (tile.vectors == 1) tile.rows = 8;
  const int64_t depth = dot->operand(0)->shape().dim(lhs_transposed ? batch : batch + 1);
  int64_t batch_size = 1;
  for (int k = 0; k < batch; ++k) batch_size *= dot->shape().dim(k);
  // The panel and the waiting sums hold the sums' type (half precision is summed in float32).
  const int64_t lane_bytes = std::max<int64_t>(4, DTypeBytes(dot->dtype()));
  const int64_t span_bytes = lane_bytes * tile.vectors * plan.width;
  tile.pack = batch_size == 1;
  tile.depth_block = tile.pack ? std::max<int64_t>(1, std::min(depth, kDotPanelBytes / span_bytes)) : depth;
  const int64_t row_bytes = std::max<int64_t>(1, tile.depth_block * DTypeBytes(dot->dtype()));
  int64_t block_rows = kDotBlockBytes / row_bytes;
  if (tile.depth_block < depth) block_rows = std::min(block_rows, kDotPartialBytes / span_bytes);
  tile.block_rows = std::max<int64_t>(1, block_rows / tile.rows) * tile.rows;
  if (tile.pack) tile.chunk_rows = std::min<int64_t>(tile.block_rows, kDotChunkRows);
  tile.dot = dot;
  tile.lhs_transposed = lhs_transposed;
  return tile;
}

// The widest power-of-two vector of at most `max_width` lanes that `length` outputs fill:
// fewer outputs than a vector, side by side (each a chain of work in order).
int NarrowVector(int64_t length, int max_width) {
  int width = 1;
  while (width * 2 <= std::min<int64_t>(length, max_width)) width *= 2;
  return width;
}

// Tiles of rows for a kRows kernel that reads an operand across its rows (a transpose
// moving the last dimension; see KernelPlan::tile_rows): each output vector of a tile's rows
// is computed in turn, so the cache lines one vector's lanes read are read again by the next
// rows at once, and a tile's rows use a whole line of each line they read. One row at a time
// read each line once per row; with a power-of-two row length all of a row's lines fall in
// one cache set, and a 1024 x 1024 float32 transpose took 2.5 ms. Block-transposed ones
// (IsBlockTransposed) take tiles of `width` rows from multiples of it. Fewer tiles than
// kTiledUnits split the columns too, into blocks of at least kMinColumnBlock vectors.
constexpr int64_t kTiledUnits = 16;
constexpr int64_t kMinColumnBlock = 8;

void PlanTiles(const Computation& c, const std::vector<const Instruction*>& roots, KernelPlan& plan) {
  if (plan.mode != KernelPlan::Mode::kRows || plan.width < 2 || plan.side_hero || plan.row_lanes > 1) return;
  bool across = false, blocks = false;
  for (const Instruction* i : c.MakePostOrder()) {
    if (IsReduction(i) || i->opcode() == Opcode::kDot) return;
    if (i->opcode() == Opcode::kTranspose && !i->attrs().dimensions.empty()) {
      int last = static_cast<int>(i->attrs().dimensions.size()) - 1;
      across = across || i->attrs().dimensions.back() != last;
      blocks = blocks || IsBlockTransposed(i);
    }
  }
  if (!across) return;
  const int w = plan.width;
  plan.block_transposed = blocks && w <= kMaxBlockLanes && (w & (w - 1)) == 0;
  plan.tile_rows = plan.block_transposed ? w : static_cast<int>(std::max<int64_t>(2, 64 / DTypeBytes(roots[0]->dtype())));
  const int64_t tiles = (plan.units + plan.tile_rows - 1) / plan.tile_rows;
  const int64_t vectors = plan.row_length / w;
  const int64_t blocks_wanted = std::min((kTiledUnits + tiles - 1) / tiles, vectors / kMinColumnBlock);
  if (tiles == 0 || blocks_wanted < 2) return;
  plan.column_block_length = (vectors + blocks_wanted - 1) / blocks_wanted * w;
  plan.column_blocks = (plan.row_length + plan.column_block_length - 1) / plan.column_block_length;
  plan.units *= plan.column_blocks;
}

}  // namespace

std::string KernelKey(const Instruction* fusion, bool in_place) {
  return fusion->shape().ToString() + (in_place ? " in place" : "") +
         fusion->AttributesToString([](const Computation*) { return std::string(); }, /*metadata=*/false) +
         " target=" + fusion->attrs().custom_call_target + "\n" + fusion->fused_computation()->StructuralText();
}

KernelPlan PlanKernel(const Instruction* fusion, int max_width, bool in_place) {
  const Computation& c = *fusion->fused_computation();
  std::vector<const Instruction*> roots = KernelRoots(c);
  KernelPlan plan;
  if (fusion->fusion_kind() == FusionKind::kWholeLoop) {
    plan.mode = KernelPlan::Mode::kWholeLoop;
    plan.units = WholeLoopLanes(fusion);
    plan.width = plan.units >= max_width ? max_width : 1;
    plan.num_outputs = static_cast<int>(fusion->shape().tuple_shapes().size());
    return plan;
  }
  if (roots.size() == 1 && roots[0]->opcode() == Opcode::kScatter) return PlanScatter(roots[0], max_width, in_place);
  if (in_place && roots.size() == 1 && roots[0]->opcode() == Opcode::kDynamicUpdateSlice) {
    const Shape& update = roots[0]->operand(1)->shape();
    plan.mode = KernelPlan::Mode::kUpdate;
    plan.row_length = update.rank() == 0 ? 1 : update.dims().back();
    plan.units = plan.row_length == 0 ? 0 : update.NumElements() / plan.row_length;
    // A chain of updates (an unrolled scan's rows) is one unit: they may overlap, in order.
    if (InPlaceUpdates(c).size() > 1) plan.units = 1;
    plan.width = plan.row_length >= max_width ? max_width : 1;
    plan.reduction_width = max_width;
    plan.side_output = {false};
    return plan;
  }
  plan.side_hero = SideOutputHero(c);
  const Shape& shape = plan.side_hero ? plan.side_hero->shape() : roots[0]->shape();
  const int lanes = ShortRowLanes(max_width);
  plan.reduction_width = max_width;
  plan.num_outputs = static_cast<int>(roots.size());
  int64_t elements = shape.NumElements();
  bool same_shapes = true;
  for (const Instruction* r : roots) {
    bool side = plan.side_hero && !r->shape().SameDims(shape);
    plan.side_output.push_back(side);
    same_shapes = same_shapes && (side || r->shape().SameDims(shape));
  }
  if (!same_shapes) {
    plan.mode = KernelPlan::Mode::kHorizontal;
    plan.width = max_width;
    for (const Instruction* r : roots) {
      plan.segment_starts.push_back(plan.units);
      plan.segment_flat.push_back(IsFlatFrom(r, r->shape().NumElements()));
      plan.units += r->shape().NumElements();
    }
    return plan;
  }
  if (!plan.side_hero && IsFlat(c, elements)) {
    plan.mode = KernelPlan::Mode::kFlat;
    plan.units = elements;
    plan.width = elements >= max_width ? max_width : 1;
    return plan;
  }
  bool row_reduction = plan.side_hero != nullptr;
  for (const Instruction* r : roots) row_reduction = row_reduction || IsRowReduction(r);
  const Instruction* hero = ReductionHero(c, IsReduce);
  if (hero) row_reduction = row_reduction || IsRowReduction(hero);
  // A column reduction walks many rows per output: wide groups of outputs make each row
  // step read a long contiguous run instead of one vector.
  int out_width = (hero && !row_reduction) ? 4 * max_width : max_width;
  if (shape.rank() == 1) {
    plan.mode = KernelPlan::Mode::kLinear1D;
    plan.units = elements;
    // A row reduction keeps the output loop scalar; EmitReduce vectorises the reduction.
    plan.width = row_reduction ? 1 : elements >= out_width ? out_width : elements >= max_width ? max_width : 1;
    // A column reduction to fewer outputs than a vector (a bias gradient over a policy's 6
    // logits) in narrower vectors: each output's sum is a chain of adds in order, and one
    // lane at a time waits on each chain in turn (6 sums over 4096 rows: 20 us).
    if (plan.width == 1 && hero && !row_reduction) {
      plan.width = NarrowVector(elements, max_width);
    }
    // Row reductions of rows shorter than a vector: a vector of rows at a time, one per
    // lane, each combined in order as one row at a time is (ShortRowWalk).
    if (ShortRowWalk(fusion, max_width).in_lanes) plan.row_lanes = lanes;
    return plan;
  }
  plan.mode = KernelPlan::Mode::kRows;
  plan.row_length = shape.rank() == 0 ? 1 : shape.dims().back();
  plan.units = plan.row_length == 0 ? 0 : elements / plan.row_length;
  // A row reduction keeps the output loop scalar; EmitReduce vectorises the reduction.
  plan.width = row_reduction                       ? 1
               : plan.row_length >= out_width ? out_width
               : plan.row_length >= max_width ? max_width
                                              : 1;
  // A product with short rows (an RL policy's few logits) in narrower vectors: its sums
  // are the work, and one lane at a time waits on each of them in turn.
  if (plan.width == 1 && !row_reduction && fusion->fusion_kind() == FusionKind::kOutput) {
    plan.width = NarrowVector(plan.row_length, max_width);
  }
  // Rows shorter than the reduction lanes (a policy's few actions) go in lanes, one row per
  // lane, when every reduction is as short: each lane then combines its row in the same
  // order (ShortRowWalk decides as this plan's width does).
  if (ShortRowWalk(fusion, max_width).in_lanes) plan.row_lanes = lanes;
  plan.dot_tile = FindDotTile(c, plan, roots);
  if (!plan.dot_tile.dot) PlanTiles(c, roots, plan);
  return plan;
}

}  // namespace fj::codegen
