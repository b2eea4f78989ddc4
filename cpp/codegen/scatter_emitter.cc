// Scatter kernels (see scatter_emitter.h).
#include "codegen/scatter_emitter.h"

#include <algorithm>
#include <functional>

#include "analysis/cost_model.h"
#include "support/error.h"

namespace fj::codegen {
// A scatter's units. Updated in place with unique indices (the user's promise), the update
// windows are independent: one unit each. Otherwise each unit owns a slice of the output,
// copies the operand's slice into it (unless in place) and applies, in row-major order, the
// updates that land in it: each element sees its updates in the same order as with one
// slice, so the bits do not depend on the thread count. Every slice reads all the updates,
// so there are several only where the copy outweighs that (at most as many update reads
// as copied elements).
KernelPlan PlanScatter(const Instruction* scatter, int max_width, bool in_place) {
  KernelPlan plan;
  plan.mode = KernelPlan::Mode::kScatter;
  plan.side_output = {false};
  plan.in_place = in_place;
  const Shape& updates = scatter->operand(2)->shape();
  int64_t n = scatter->shape().NumElements();
  int64_t u = updates.NumElements();
  int64_t window = 1;
  for (int64_t d : scatter->attrs().scatter.update_window_dims) window *= updates.dim(static_cast<int>(d));
  if (in_place && scatter->attrs().scatter.unique_indices && window > 0) {
    plan.scatter_by_updates = true;
    plan.row_length = window;
    plan.units = u / window;
    plan.work = u;
    return plan;
  }
  if (max_width > 1 && ScattersRows(scatter)) {
    // Whole rows (CPU): units are slices of the operand's rows; each reads every window's
    // index once and combines the windows that land in its rows, in order, a vector of the
    // row at a time. More slices read the indices more often: at most a quarter as many
    // index reads as update elements, and one slice for little work.
    const int64_t rows = scatter->shape().dim(0);
    const int64_t row = rows == 0 ? 0 : n / rows;
    const int64_t windows = row == 0 ? 0 : u / row;
    int64_t slices = std::min<int64_t>({64, rows, row / 4});
    if (u < 65536) slices = 1;
    slices = std::max<int64_t>(slices, 1);
    plan.scatter_rows = true;
    plan.width = row >= max_width ? max_width : 1;
    plan.row_length = std::max<int64_t>((rows + slices - 1) / slices, 1);
    plan.units = (rows + plan.row_length - 1) / plan.row_length;
    plan.work = (in_place ? 0 : n) + u + plan.units * windows;
    return plan;
  }
  // The CPU's threads take slices of a few pages; the GPU's many threads smaller ones.
  int64_t min_slice = max_width > 1 ? 16384 : 256;
  int64_t slices = in_place ? 1 : std::min<int64_t>(64, n / min_slice);
  while (slices > 1 && slices * u > n) slices /= 2;
  slices = std::max<int64_t>(slices, 1);
  plan.row_length = std::max<int64_t>((n + slices - 1) / slices, 1);
  plan.units = (n + plan.row_length - 1) / plan.row_length;
  plan.work = (in_place ? 0 : n) + plan.units * u;
  return plan;
}

// A scatter's units [begin, end) (PlanScatter). Slices: the output elements [lo, hi) of the
// units, copied from the operand unless they share its buffer, then each update element, in
// row-major order, combined into the element its window puts it at when that lies in
// [lo, hi); a window that does not fit is skipped (XLA). Update windows (in place, unique
// indices): each unit's window elements combined into theirs.
namespace {

// Rows [begin, end) x row_length of a whole-row scatter (PlanScatter): copied from the
// operand unless they share its buffer, then each window, in order, whose index lands in
// them combined into its row, `plan.width` lanes at a time (a scalar tail). Each output
// element sees its updates in the same order whatever the slices: the same bits.
void EmitScatterRows(Builder& b, ElementalEmitter& emitter, const Instruction* scatter, llvm::Value* out,
                     const KernelPlan& plan, llvm::Value* begin, llvm::Value* end) {
  const Instruction* operand = scatter->operand(0);
  const Instruction* indices = scatter->operand(1);
  const Instruction* updates = scatter->operand(2);
  const ScatterDims& s = scatter->attrs().scatter;
  const std::vector<int64_t>& odims = operand->shape().dims();
  const std::vector<int64_t>& udims = updates->shape().dims();
  const DType t = scatter->dtype();
  const int64_t rows = odims[0];
  const int64_t row = operand->shape().NumElements() / rows;
  const size_t first = udims.size() - (odims.size() - 1);
  const std::vector<int64_t> batch_dims(udims.begin(), udims.begin() + static_cast<std::ptrdiff_t>(first));
  const std::vector<int64_t> window_dims(udims.begin() + static_cast<std::ptrdiff_t>(first), udims.end());
  int64_t windows = 1;
  for (int64_t d : batch_dims) windows *= d;
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::Value* r0 = b.CreateMul(begin, b.getInt64(plan.row_length));
  llvm::Value* r1 = b.CreateMul(end, b.getInt64(plan.row_length));
  r1 = b.CreateSelect(b.CreateICmpSLT(r1, b.getInt64(rows)), r1, b.getInt64(rows));
  // `body(i, lanes)` for i in [lo, hi): vectors of plan.width, then one lane at a time.
  auto lanes_loop = [&](llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*, LaneMath&)>& body,
                        const char* name) {
    llvm::Value* vec_hi = lo;
    if (plan.width > 1) {
      llvm::Value* count = b.CreateSub(hi, lo);
      vec_hi = b.CreateAdd(lo, b.CreateMul(b.CreateUDiv(count, b.getInt64(plan.width)), b.getInt64(plan.width)));
      ElementalEmitter::WidthScope wide(emitter, plan.width);
      emitter.ForLoop(lo, vec_hi, plan.width, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        LaneMath lanes(b, plan.width);
        body(i, lanes);
        return std::vector<llvm::Value*>{};
      }, name);
    }
    ElementalEmitter::WidthScope scalar(emitter, 1);
    emitter.ForLoop(vec_hi, hi, 1, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
      LaneMath lanes(b, 1);
      body(i, lanes);
      return std::vector<llvm::Value*>{};
    }, name);
  };
  if (!plan.in_place) {
    lanes_loop(b.CreateMul(r0, b.getInt64(row)), b.CreateMul(r1, b.getInt64(row)), [&](llvm::Value* i, LaneMath& lanes) {
      Index at = MultiIndex(lanes, lanes.LaneRamp(i), odims);
      StoreElements(b, out, t, lanes.LaneRamp(i), emitter.Emit(operand, at), lanes.width());
    }, "scatter.copy");
  }
  const bool implicit = s.index_vector_dim == indices->shape().rank();
  ElementalEmitter::WidthScope scalar(emitter, 1);
  // Window j's row and batch index, and whether the row is this unit's (which also means
  // in the operand: a window that does not fit is skipped, as XLA skips it).
  auto window_row = [&](llvm::Value* j, Index& batch) {
    LaneMath one(b, 1);
    batch = batch_dims.empty() ? Index{} : MultiIndex(one, one.Uniform(j), batch_dims);
    Index at;
    at.dims = batch.dims;
    if (!implicit) at.dims.insert(at.dims.begin() + s.index_vector_dim, one.Constant(0));
    Val v = emitter.Emit(indices, at);
    llvm::Value* r = IsSignedInt(indices->dtype()) ? b.CreateSExtOrTrunc(v.v, b.getInt64Ty())
                                                   : b.CreateZExtOrTrunc(v.v, b.getInt64Ty());
    return std::make_pair(r, b.CreateICmpULT(b.CreateSub(r, r0), b.CreateSub(r1, r0)));
  };
  // Vector k of window j's updates.
  auto update_vector = [&](const Index& batch, int64_t k, LaneMath& lanes) {
    Index uindex = MultiIndex(lanes, lanes.LaneRamp(b.getInt64(k * plan.width)), window_dims);
    uindex.dims.insert(uindex.dims.begin(), batch.dims.begin(), batch.dims.end());
    return lanes.Widen(emitter.Emit(updates, uindex));
  };
  const int64_t vectors = plan.width > 1 && row % plan.width == 0 ? row / plan.width : 0;
  if (vectors >= 1 && vectors <= 4) {
    // Rows of at most 4 vectors: the row being combined stays in registers while windows
    // keep landing in it, and is written back when another row comes (sorted segment ids:
    // each combine would otherwise wait on the store of the one before). Same order of
    // combines per element: the same bits.
    ElementalEmitter::WidthScope wide(emitter, plan.width);
    LaneMath lanes(b, plan.width);
    auto row_at = [&](llvm::Value* r, int64_t k) { return lanes.LaneRamp(b.CreateAdd(b.CreateMul(r, b.getInt64(row)), b.getInt64(k * plan.width))); };
    auto flush = [&](llvm::Value* cur, const std::vector<llvm::Value*>& acc) {
      for (int64_t k = 0; k < vectors; ++k) StoreElements(b, out, t, row_at(cur, k), {acc[k], true}, plan.width);
    };
    std::vector<llvm::Value*> init = {b.getInt64(-1)};
    for (int64_t k = 0; k < vectors; ++k) init.push_back(llvm::PoisonValue::get(WithWidth(RegisterType(ctx, t), plan.width)));
    std::vector<llvm::Value*> last = emitter.ForLoop(b.getInt64(0), b.getInt64(windows), 1, init,
                                                     [&](llvm::Value* j, const std::vector<llvm::Value*>& c) {
      Index batch;
      auto [r, own] = window_row(j, batch);
      llvm::Value* cur = c[0];
      llvm::BasicBlock* entry = b.GetInsertBlock();
      llvm::BasicBlock* mine = llvm::BasicBlock::Create(ctx, "scatter.row", fn);
      llvm::BasicBlock* other = llvm::BasicBlock::Create(ctx, "scatter.switch", fn);
      llvm::BasicBlock* write = llvm::BasicBlock::Create(ctx, "scatter.flush", fn);
      llvm::BasicBlock* load = llvm::BasicBlock::Create(ctx, "scatter.load", fn);
      llvm::BasicBlock* combine = llvm::BasicBlock::Create(ctx, "scatter.combine", fn);
      llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "scatter.next", fn);
      b.CreateCondBr(own, mine, next);
      b.SetInsertPoint(mine);
      b.CreateCondBr(b.CreateICmpEQ(r, cur), combine, other);
      b.SetInsertPoint(other);
      b.CreateCondBr(b.CreateICmpSGE(cur, b.getInt64(0)), write, load);
      b.SetInsertPoint(write);
      flush(cur, std::vector<llvm::Value*>(c.begin() + 1, c.end()));
      b.CreateBr(load);
      b.SetInsertPoint(load);
      std::vector<llvm::Value*> loaded;
      for (int64_t k = 0; k < vectors; ++k) loaded.push_back(lanes.Widen(LoadElements(b, out, t, row_at(r, k), plan.width)));
      b.CreateBr(combine);
      b.SetInsertPoint(combine);
      std::vector<llvm::Value*> combined;
      for (int64_t k = 0; k < vectors; ++k) {
        llvm::PHINode* acc = b.CreatePHI(loaded[k]->getType(), 2);
        acc->addIncoming(c[1 + k], mine);
        acc->addIncoming(loaded[k], load);
        combined.push_back(acc);
      }
      for (int64_t k = 0; k < vectors; ++k) {
        combined[k] = emitter.EmitCombiner(*scatter->to_apply(), combined[k], update_vector(batch, k, lanes));
      }
      llvm::BasicBlock* combined_end = b.GetInsertBlock();
      b.CreateBr(next);
      b.SetInsertPoint(next);
      std::vector<llvm::Value*> out_values;
      llvm::PHINode* now = b.CreatePHI(b.getInt64Ty(), 2);
      now->addIncoming(cur, entry);
      now->addIncoming(r, combined_end);
      out_values.push_back(now);
      for (int64_t k = 0; k < vectors; ++k) {
        llvm::PHINode* acc = b.CreatePHI(combined[k]->getType(), 2);
        acc->addIncoming(c[1 + k], entry);
        acc->addIncoming(combined[k], combined_end);
        out_values.push_back(acc);
      }
      return out_values;
    }, "scatter.windows");
    llvm::BasicBlock* write = llvm::BasicBlock::Create(ctx, "scatter.last", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "scatter.written", fn);
    b.CreateCondBr(b.CreateICmpSGE(last[0], b.getInt64(0)), write, done);
    b.SetInsertPoint(write);
    flush(last[0], std::vector<llvm::Value*>(last.begin() + 1, last.end()));
    b.CreateBr(done);
    b.SetInsertPoint(done);
    return;
  }
  emitter.ForLoop(b.getInt64(0), b.getInt64(windows), 1, {}, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
    Index batch;
    auto [r, own] = window_row(j, batch);
    llvm::BasicBlock* apply = llvm::BasicBlock::Create(ctx, "scatter.row", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "scatter.next", fn);
    b.CreateCondBr(own, apply, next);
    b.SetInsertPoint(apply);
    llvm::Value* base = b.CreateMul(r, b.getInt64(row));
    lanes_loop(b.getInt64(0), b.getInt64(row), [&](llvm::Value* e, LaneMath& lanes) {
      Index uindex = MultiIndex(lanes, lanes.LaneRamp(e), window_dims);
      uindex.dims.insert(uindex.dims.begin(), batch.dims.begin(), batch.dims.end());
      Val update = emitter.Emit(updates, uindex);
      IndexDim at_out = lanes.LaneRamp(b.CreateAdd(base, e));
      Val old = LoadElements(b, out, t, at_out, lanes.width());
      llvm::Value* combined = emitter.EmitCombiner(*scatter->to_apply(), lanes.Widen(old), lanes.Widen(update));
      StoreElements(b, out, t, at_out, {combined, lanes.width() > 1}, lanes.width());
    }, "scatter.lanes");
    b.CreateBr(next);
    b.SetInsertPoint(next);
    return std::vector<llvm::Value*>{};
  }, "scatter.windows");
}

}  // namespace

void EmitScatterUnits(Builder& b, ElementalEmitter& emitter, const Instruction* scatter, llvm::Value* out,
                      const KernelPlan& plan, llvm::Value* begin, llvm::Value* end) {
  if (plan.scatter_rows) {
    llvm::LLVMContext& ctx = b.getContext();
    llvm::Function* fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock* run = llvm::BasicBlock::Create(ctx, "scatter.run", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "scatter.done", fn);
    b.CreateCondBr(b.CreateICmpULT(begin, end), run, done);
    b.SetInsertPoint(run);
    EmitScatterRows(b, emitter, scatter, out, plan, begin, end);
    b.CreateBr(done);
    b.SetInsertPoint(done);
    return;
  }
  ElementalEmitter::WidthScope scalar(emitter, 1);
  const Instruction* operand = scatter->operand(0);
  const Instruction* indices = scatter->operand(1);
  const Instruction* updates = scatter->operand(2);
  const ScatterDims& s = scatter->attrs().scatter;
  const std::vector<int64_t>& odims = operand->shape().dims();
  const std::vector<int64_t>& udims = updates->shape().dims();
  DType t = scatter->dtype();
  auto contains = [](const std::vector<int64_t>& v, int64_t d) { return std::count(v.begin(), v.end(), d) > 0; };
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* run = llvm::BasicBlock::Create(ctx, "scatter.run", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "scatter.done", fn);
  b.CreateCondBr(b.CreateICmpULT(begin, end), run, done);
  b.SetInsertPoint(run);
  int64_t n = operand->shape().NumElements();
  llvm::Value* lo = b.CreateMul(begin, b.getInt64(plan.row_length));
  llvm::Value* hi = b.CreateMul(end, b.getInt64(plan.row_length));
  hi = b.CreateSelect(b.CreateICmpSLT(hi, b.getInt64(n)), hi, b.getInt64(n));
  if (!plan.in_place) {
    emitter.ForLoop(lo, hi, 1, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
      LaneMath lanes(b, 1);
      Index at;
      at.linear = lanes.Uniform(i);
      if (!odims.empty()) at = MultiIndex(lanes, *at.linear, odims);
      StoreElements(b, out, t, lanes.Uniform(i), emitter.Emit(operand, at), 1);
      return std::vector<llvm::Value*>{};
    }, "scatter.copy");
  }
  // Window sizes along the operand's dimensions (1 where inserted).
  std::vector<int64_t> window(odims.size(), 1);
  size_t w = 0;
  for (size_t d = 0; d < odims.size(); ++d) {
    if (!contains(s.inserted_window_dims, static_cast<int64_t>(d))) window[d] = udims[s.update_window_dims[w++]];
  }
  bool implicit = s.index_vector_dim == indices->shape().rank();
  bool owned_everywhere = plan.scatter_by_updates || plan.units == 1;
  // One update element: `uindex` its index, `batch` and `offsets` its scatter and window
  // coordinates.
  auto apply = [&](LaneMath& lanes, const Index& uindex, const std::vector<IndexDim>& batch,
                   const std::vector<IndexDim>& offsets) {
    std::vector<llvm::Value*> pos(odims.size(), b.getInt64(0));
    llvm::Value* fits = b.getTrue();
    for (size_t k = 0; k < s.scatter_dims_to_operand_dims.size(); ++k) {
      Index at;
      at.dims = batch;
      if (!implicit) at.dims.insert(at.dims.begin() + s.index_vector_dim, lanes.Constant(static_cast<int64_t>(k)));
      Val v = emitter.Emit(indices, at);
      llvm::Value* start = IsSignedInt(indices->dtype()) ? b.CreateSExtOrTrunc(v.v, b.getInt64Ty())
                                                         : b.CreateZExtOrTrunc(v.v, b.getInt64Ty());
      int64_t d = s.scatter_dims_to_operand_dims[k];
      fits = b.CreateAnd(fits, b.CreateAnd(b.CreateICmpSGE(start, b.getInt64(0)),
                                           b.CreateICmpSLE(start, b.getInt64(odims[d] - window[d]))));
      pos[d] = start;
    }
    size_t next = 0;
    for (size_t d = 0; d < odims.size(); ++d) {
      if (contains(s.inserted_window_dims, static_cast<int64_t>(d))) continue;
      pos[d] = b.CreateAdd(pos[d], lanes.Materialize(offsets[next++]));
    }
    llvm::Value* linear = b.getInt64(0);
    for (size_t d = 0; d < odims.size(); ++d) linear = b.CreateAdd(b.CreateMul(linear, b.getInt64(odims[d])), pos[d]);
    if (!owned_everywhere) {
      fits = b.CreateAnd(fits, b.CreateAnd(b.CreateICmpSGE(linear, lo), b.CreateICmpSLT(linear, hi)));
    }
    llvm::BasicBlock* apply_block = llvm::BasicBlock::Create(ctx, "scatter.apply", fn);
    llvm::BasicBlock* next_update = llvm::BasicBlock::Create(ctx, "scatter.next", fn);
    b.CreateCondBr(fits, apply_block, next_update);
    b.SetInsertPoint(apply_block);
    Val update = emitter.Emit(updates, uindex);
    Val old = LoadElements(b, out, t, lanes.Uniform(linear), 1);
    llvm::Value* combined = emitter.EmitCombiner(*scatter->to_apply(), old.v, update.v);
    StoreElements(b, out, t, lanes.Uniform(linear), {combined, false}, 1);
    b.CreateBr(next_update);
    b.SetInsertPoint(next_update);
  };
  if (!plan.scatter_by_updates) {
    emitter.ForLoop(b.getInt64(0), b.getInt64(updates->shape().NumElements()), 1, {},
                    [&](llvm::Value* u, const std::vector<llvm::Value*>&) {
      LaneMath lanes(b, 1);
      Index uindex = udims.empty() ? Index{} : MultiIndex(lanes, lanes.Uniform(u), udims);
      std::vector<IndexDim> batch, offsets;
      for (size_t d = 0; d < udims.size(); ++d) {
        (contains(s.update_window_dims, static_cast<int64_t>(d)) ? offsets : batch).push_back(uindex.dims[d]);
      }
      apply(lanes, uindex, batch, offsets);
      return std::vector<llvm::Value*>{};
    }, "scatter.updates");
  } else {
    std::vector<int64_t> batch_dims, window_dims;
    for (size_t d = 0; d < udims.size(); ++d) {
      (contains(s.update_window_dims, static_cast<int64_t>(d)) ? window_dims : batch_dims).push_back(udims[d]);
    }
    emitter.ForLoop(begin, end, 1, {}, [&](llvm::Value* unit, const std::vector<llvm::Value*>&) {
      emitter.ForLoop(b.getInt64(0), b.getInt64(plan.row_length), 1, {},
                      [&](llvm::Value* e, const std::vector<llvm::Value*>&) {
        LaneMath lanes(b, 1);
        Index batch = batch_dims.empty() ? Index{} : MultiIndex(lanes, lanes.Uniform(unit), batch_dims);
        Index offsets = window_dims.empty() ? Index{} : MultiIndex(lanes, lanes.Uniform(e), window_dims);
        Index uindex;
        size_t nb = 0, nw = 0;
        for (size_t d = 0; d < udims.size(); ++d) {
          uindex.dims.push_back(contains(s.update_window_dims, static_cast<int64_t>(d)) ? offsets.dims[nw++]
                                                                                          : batch.dims[nb++]);
        }
        apply(lanes, uindex, batch.dims, offsets.dims);
        return std::vector<llvm::Value*>{};
      }, "scatter.window");
      return std::vector<llvm::Value*>{};
    }, "scatter.windows");
  }
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

}  // namespace fj::codegen
