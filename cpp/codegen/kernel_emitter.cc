// Kernel emission (see kernel_emitter.h).
#include "codegen/kernel_emitter.h"

#include <algorithm>
#include <numeric>

#include "analysis/buffer_assignment.h"
#include "analysis/cost_model.h"
#include "analysis/kernel_heroes.h"
#include "codegen/block_transpose.h"
#include "codegen/elemental.h"
#include "codegen/scatter_emitter.h"
#include "codegen/whole_loop_emitter.h"
#include "ir/computation.h"
#include "support/error.h"

namespace fj::codegen {
namespace {

// Vector iterations per trip of a kernel's main loop: more loads in flight, less loop overhead.
constexpr int kVectorUnroll = 4;

// Values a row-fused kernel keeps for the row it walks (IsKeptRowValue), in the order
// its per-row reductions first need them.
std::vector<const Instruction*> KeptRowValues(const std::vector<const Instruction*>& per_row,
                                              const Shape& kernel) {
  std::vector<const Instruction*> kept;
  for (const Instruction* r : per_row) {
    const Instruction* e = r->operand(0);
    if (IsKeptRowValue(e, kernel) && std::find(kept.begin(), kept.end(), e) == kept.end()) kept.push_back(e);
  }
  return kept;
}

}  // namespace

std::vector<const Instruction*> CooperativeReductions(const Instruction* fusion, const KernelPlan& plan) {
  const Computation& comp = *fusion->fused_computation();
  std::vector<const Instruction*> out;
  if (plan.mode == KernelPlan::Mode::kRows) {
    const Shape& shape = plan.side_hero ? plan.side_hero->shape() : KernelRoots(comp)[0]->shape();
    for (const Instruction* i : comp.MakePostOrder()) {
      if (IsPerRowReduction(i, shape)) out.push_back(i);
    }
    if (!out.empty()) return out;
  }
  if (plan.mode != KernelPlan::Mode::kRows && plan.mode != KernelPlan::Mode::kLinear1D) return out;
  if (plan.side_hero) return {plan.side_hero};
  const Instruction* hero = ReductionHero(comp, IsReduce);
  if (hero && IsRowReduction(hero)) out.push_back(hero);
  return out;
}


namespace {

// The indices of the outer dimensions (all but the last) of row `row` of `dims`, uniform
// across its lanes.
std::vector<llvm::Value*> OuterIndices(Builder& b, llvm::Value* row, const std::vector<int64_t>& dims) {
  const int rank = static_cast<int>(dims.size());
  std::vector<llvm::Value*> outer(std::max(rank - 1, 0));
  llvm::Value* rest = row;
  for (int k = rank - 2; k >= 0; --k) {
    if (k == 0) {
      outer[k] = rest;
    } else {
      outer[k] = b.CreateURem(rest, b.getInt64(dims[k]));
      rest = b.CreateUDiv(rest, b.getInt64(dims[k]));
    }
  }
  return outer;
}

}  // namespace

llvm::Function* EmitKernelBody(llvm::Module& module, const Instruction* fusion, const KernelPlan& plan,
                               const std::string& name, bool may_alias, const WarpCooperation* warp) {
  llvm::LLVMContext& ctx = module.getContext();
  const Computation& comp = *fusion->fused_computation();
  std::vector<const Instruction*> roots = KernelRoots(comp);
  int num_outputs = static_cast<int>(roots.size());
  int num_buffers = num_outputs + fusion->operand_count();
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);

  // The body takes each buffer as its own noalias argument; a thin wrapper unpacks the
  // buffer table, so the same kernel can be called directly or from the thread pool.
  std::vector<llvm::Type*> params(num_buffers, ptr);
  params.push_back(i64);
  params.push_back(i64);
  auto* body_type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  llvm::Function* body =
      llvm::Function::Create(body_type, llvm::GlobalValue::InternalLinkage, name + ".body", module);
  body->addFnAttr(llvm::Attribute::NoUnwind);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  for (int i = 0; i < num_buffers; ++i) {
    if (!may_alias) body->addParamAttr(i, llvm::Attribute::NoAlias);
    if (i >= num_outputs && !may_alias) body->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  std::vector<llvm::Value*> buffers;
  for (int i = 0; i < num_buffers; ++i) buffers.push_back(body->getArg(i));
  llvm::Value* begin = body->getArg(num_buffers);
  llvm::Value* end = body->getArg(num_buffers + 1);

  Builder b(llvm::BasicBlock::Create(ctx, "entry", body));
  WarpCooperation warp_here;
  if (warp) {
    warp_here = *warp;
    warp_here.lane = warp->lane_id(b);
    warp = &warp_here;
  }

  auto load = [&](llvm::Value* base, DType t, const IndexDim& linear, int width) -> Val {
    return LoadElements(b, base, t, linear, width);
  };
  auto reader = [&](const Instruction* source, const Index& index, int width) -> Val {
    LaneMath lanes(b, width);
    IndexDim linear = LinearIndex(lanes, index, source->shape().dims());
    llvm::Value* base = source->opcode() == Opcode::kParameter
                            ? buffers[num_outputs + source->parameter_number()]
                            : ConstantGlobal(module, source);
    return load(base, source->dtype(), linear, width);
  };
  ElementalEmitter emitter(b, reader, plan.width, plan.reduction_width);
  const bool whole_vectors = plan.whole_vector_chunks && !warp && plan.width > 1 && plan.units % plan.width == 0;
  emitter.set_native_half(plan.native_half);

  // GPU, a warp per unit: the lanes share the unit's reductions (CooperateOn). Row-fused
  // kernels split the row's elements between the lanes; the other kernels compute each
  // output element together, and lane 0 stores it.
  std::vector<const Instruction*> cooperative = warp ? CooperativeReductions(fusion, plan) : std::vector<const Instruction*>{};
  const Shape& kernel_shape = plan.side_hero ? plan.side_hero->shape() : roots[0]->shape();
  const bool lane_rows = warp && plan.mode == KernelPlan::Mode::kRows && !cooperative.empty() &&
                         IsPerRowReduction(cooperative[0], kernel_shape);
  if (warp) emitter.CooperateOn(warp, cooperative);
  auto lane0 = [&](const std::function<void()>& emit) {
    if (!warp || lane_rows) return emit();
    llvm::Function* fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock* yes = llvm::BasicBlock::Create(ctx, "lane0.store", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "lane0.done", fn);
    b.CreateCondBr(b.CreateICmpEQ(warp->lane, b.getInt64(0)), yes, done);
    b.SetInsertPoint(yes);
    emit();
    b.CreateBr(done);
    b.SetInsertPoint(done);
  };
  // Stores output k's value `v` (`width` lanes) at `linear`, whose lanes are consecutive.
  auto store = [&](int k, const IndexDim& linear, const Val& v, int width) {
    lane0([&] { StoreElements(b, buffers[k], roots[k]->dtype(), linear, v, width); });
  };

  // Stores every root's value at `index` (whose linear form is `linear`); side outputs are
  // stored by their reduction's loop instead.
  // A rank-1 kernel walked one row (or one lane's row) at a time: its row reductions are
  // computed at the unit's index before the outputs, so that the loops of the others find
  // them in the emitter's cache instead of running them again for each element they read
  // (a policy's entropy: its logits' max inside the sum of exp(logits - max)). RowSpace
  // tells the cost model so.
  std::vector<const Instruction*> unit_reductions;
  if (plan.mode == KernelPlan::Mode::kLinear1D && !plan.side_hero && (plan.width == 1 || plan.row_lanes > 1)) {
    for (const Instruction* i : comp.MakePostOrder()) {
      if (IsReduce(i) && IsRowReduction(i) && i->dimensions().size() == 1 && i->shape().SameDims(roots[0]->shape())) {
        unit_reductions.push_back(i);
      }
    }
  }
  const Instruction* updating = roots[0];  // kUpdate: the dynamic-update-slice being written
  auto emit_group = [&](const Index& index, const IndexDim& linear) {
    for (const Instruction* r : unit_reductions) emitter.Emit(r, index);
    int width = emitter.width();
    // All values first, then the stores: an output may overwrite an operand it was
    // computed from (loop state updated in place).
    std::vector<Val> values(num_outputs);
    for (int k = 0; k < num_outputs; ++k) {
      if (plan.side_hero && plan.side_output[k]) continue;
      // An in-place update computes only the update, at the update's index.
      const Instruction* value = plan.mode == KernelPlan::Mode::kUpdate ? updating->operand(1) : roots[k];
      values[k] = emitter.Emit(value, index);
    }
    for (int k = 0; k < num_outputs; ++k) {
      if (plan.side_hero && plan.side_output[k]) continue;
      store(k, linear, values[k], width);
    }
  };
  if (plan.side_hero) {
    const std::vector<int64_t>& in_dims = plan.side_hero->operand(0)->shape().dims();
    emitter.VisitReduction(plan.side_hero, [&, in_dims](const Index& at, int width) {
      LaneMath lanes(b, width);
      IndexDim linear = LinearIndex(lanes, at, in_dims);
      for (int k = 0; k < num_outputs; ++k) {
        if (!plan.side_output[k]) continue;
        const std::vector<int64_t>& dims = roots[k]->shape().dims();
        Index own = dims == in_dims ? at : MultiIndex(lanes, linear, dims);
        StoreElements(b, buffers[k], roots[k]->dtype(), linear, emitter.Emit(roots[k], own), width);
      }
    });
  }

  // Splits [lo, hi) into full vector steps and a scalar tail; `at(i, lanes)` gives the
  // index of the group starting at i. `whole_vectors`: [lo, hi) is always whole vectors
  // (KernelPlan::whole_vector_chunks), so the tail is not emitted: it never ran, and LLVM
  // compiled it (about half of such a kernel's code).
  auto vector_loop = [&](llvm::Value* lo, llvm::Value* hi,
                         const std::function<std::pair<Index, IndexDim>(llvm::Value*, LaneMath&)>& at,
                         bool whole_vectors = false) {
    if (lane_rows) {
      // The row's elements, every warp->lanes-th one from the lane's number on.
      ElementalEmitter::WidthScope scalar(emitter, 1);
      ElementalEmitter::DivergentScope divergent(emitter);
      emitter.ForLoop(b.CreateAdd(lo, warp->lane), hi, warp->lanes, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        LaneMath lanes(b, 1);
        auto [index, linear] = at(i, lanes);
        emit_group(index, linear);
        return std::vector<llvm::Value*>{};
      }, "lanes", {1, false});
      return;
    }
    int width = plan.width;
    llvm::Value* vec_hi = lo;
    if (width > 1) {
      vec_hi = hi;
      if (!whole_vectors) {
        llvm::Value* n = b.CreateSub(hi, lo);
        vec_hi = b.CreateAdd(lo, b.CreateMul(b.CreateUDiv(n, b.getInt64(width)), b.getInt64(width)));
      }
      emitter.ForLoop(lo, vec_hi, width, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        LaneMath lanes(b, width);
        auto [index, linear] = at(i, lanes);
        emit_group(index, linear);
        return std::vector<llvm::Value*>{};
      }, "vec", {kVectorUnroll, false});
      if (whole_vectors) return;
    }
    ElementalEmitter::WidthScope scalar(emitter, 1);
    emitter.ForLoop(vec_hi, hi, 1, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
      LaneMath lanes(b, 1);
      auto [index, linear] = at(i, lanes);
      emit_group(index, linear);
      return std::vector<llvm::Value*>{};
    }, "tail", {1, false});
  };

  // Computes `e` over the row at `outer` into `buffer` (full vectors, then a scalar tail);
  // from then on the emitter reads it from there wherever the row indexes it. With rows in
  // lanes (`rows` > 1, plan.row_lanes), `buffer` holds a vector of their rows per position.
  auto keep_row_value = [&](const Instruction* e, llvm::Value* buffer, const std::vector<IndexDim>& outer, int rows) {
    DType t = e->dtype();
    llvm::Type* storage = StorageType(ctx, t);
    if (emitter.KeepsRowValue(e)) return;
    auto fill = [&](llvm::Value* j, int width) {
      LaneMath lanes(b, width);
      Index index{outer, std::nullopt};
      index.dims.push_back(rows > 1 ? lanes.Uniform(j) : lanes.LaneRamp(j));
      llvm::Value* v = lanes.Widen(emitter.Emit(e, index));
      llvm::Value* at = rows > 1 ? b.CreateMul(j, b.getInt64(rows)) : j;
      b.CreateAlignedStore(StoreValue(b, t, v), b.CreateGEP(storage, buffer, at), llvm::Align(DTypeBytes(t)));
    };
    int width = rows > 1 ? 1 : plan.reduction_width;
    int64_t vec_end = width > 1 ? plan.row_length - plan.row_length % width : 0;
    if (vec_end > 0) {
      ElementalEmitter::WidthScope wide(emitter, width);
      emitter.ForLoop(b.getInt64(0), b.getInt64(vec_end), width, {}, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
        fill(j, width);
        return std::vector<llvm::Value*>{};
      }, "keep", {kVectorUnroll, false});
    }
    if (vec_end < plan.row_length) {
      ElementalEmitter::WidthScope scalar(emitter, rows);
      emitter.ForLoop(b.getInt64(vec_end), b.getInt64(plan.row_length), 1, {}, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
        fill(j, rows);
        return std::vector<llvm::Value*>{};
      }, rows > 1 ? "keep.lanes" : "keep.tail", {1, false});
    }
    emitter.KeepRowValue(e, {outer, [&load, &b, buffer, t, rows](const IndexDim& position, int width) {
                               if (rows == 1) return load(buffer, t, position, width);
                               LaneMath lanes(b, width);
                               IndexDim own = lanes.Add(lanes.MulConst(position, rows), lanes.LaneRamp(b.getInt64(0)));
                               return load(buffer, t, own, width);
                             }});
  };

  // Rows in lanes (plan.row_lanes): a block of `rows` short rows is contiguous, so operands
  // are copied into stack buffers transposed (position-major), where position j of every
  // lane's row is one vector, and outputs copied out of them the same way: strided loads
  // and stores would be gathers and scatters (microcoded on AMD's Zen, absent before
  // AVX2). A buffer for `length` positions of `t` (times the lanes' rows; kept row values
  // use it too):
  auto stage = [&](DType t, int64_t length, const std::string& what) {
    auto* buffer = b.CreateAlloca(llvm::ArrayType::get(StorageType(ctx, t), length * plan.row_lanes), nullptr, what);
    buffer->setAlignment(llvm::Align(64));
    return buffer;
  };
  // Copies the block of rows from `row0` between `flat` (row-major) and `staged`.
  auto transpose = [&](llvm::Value* flat, llvm::Value* staged, DType t, int64_t length, llvm::Value* row0, bool in) {
    const int rows = plan.row_lanes;
    llvm::Type* storage = StorageType(ctx, t);
    llvm::Value* block = b.CreateGEP(storage, flat, b.CreateMul(row0, b.getInt64(length)));
    // By vector shuffles where they are faster than scalar copies (HowRowsCopy).
    const int piece = RowCopyVectorLanes(plan.reduction_width, DTypeBytes(t));
    llvm::Align staged_align(std::min<int64_t>(64, piece * DTypeBytes(t)));
    switch (HowRowsCopy(length, plan.reduction_width, DTypeBytes(t))) {
      case RowCopy::kShuffleTree: {
        llvm::Align flat_align(DTypeBytes(t));
        if (in) {  // staged[j * rows + r] = flat[r * length + j]
          EmitPermutedCopy(b, storage, block, flat_align, staged, staged_align, rows * length, piece,
                           [&](int64_t e) { return (e % rows) * length + e / rows; });
        } else {  // flat[e] = staged[(e % length) * rows + e / length]
          EmitPermutedCopy(b, storage, staged, staged_align, block, flat_align, rows * length, piece,
                           [&](int64_t e) { return (e % length) * rows + e / length; });
        }
        return;
      }
      case RowCopy::kTranspose:
        EmitMaskedBlockTranspose(b, storage, block, staged, staged_align, rows, length, in);
        return;
      case RowCopy::kElementwise:
        break;
    }
    emitter.ForLoop(b.getInt64(0), b.getInt64(rows), 1, {}, [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
      llvm::Value* row = b.CreateGEP(storage, block, b.CreateMul(r, b.getInt64(length)));
      for (int64_t j = 0; j < length; ++j) {
        llvm::Value* a = b.CreateGEP(storage, row, b.getInt64(j));
        llvm::Value* s = b.CreateGEP(storage, staged, b.CreateAdd(r, b.getInt64(j * rows)));
        b.CreateStore(b.CreateLoad(storage, in ? a : s), in ? s : a);
      }
      return std::vector<llvm::Value*>{};
    }, in ? "stage.in" : "stage.out", {1, false});
  };
  // The operands whose rows are the lanes' rows: dimensions `leading`, then a short one.
  struct Staged {
    const Instruction* param;
    int64_t length;
    llvm::Value* buffer;
  };
  auto stage_operands = [&](const std::vector<int64_t>& leading) {
    std::vector<Staged> staged;
    for (const Instruction* p : comp.parameters()) {
      const std::vector<int64_t>& d = p->shape().dims();
      if (d.size() != leading.size() + 1 || !std::equal(leading.begin(), leading.end(), d.begin()) ||
          d.back() >= plan.row_lanes) {
        continue;
      }
      staged.push_back({p, d.back(), stage(p->dtype(), d.back(), "staged." + p->name())});
    }
    return staged;
  };
  // Copies the block from `row0` of each staged operand in; the emitter then reads the
  // lanes' rows (leading dimensions `at`) from there.
  auto read_staged = [&](const std::vector<Staged>& staged, const Index& at, llvm::Value* row0) {
    const int rows = plan.row_lanes;
    for (const Staged& s : staged) {
      transpose(buffers[num_outputs + s.param->parameter_number()], s.buffer, s.param->dtype(), s.length, row0, true);
      emitter.KeepRowValue(s.param, {at.dims, [&load, &b, s, rows](const IndexDim& position, int width) {
                                       LaneMath l(b, width);
                                       IndexDim own = l.Add(l.MulConst(position, rows), l.LaneRamp(b.getInt64(0)));
                                       return load(s.buffer, s.param->dtype(), own, width);
                                     }});
    }
  };

  const Shape& out_shape = plan.side_hero ? plan.side_hero->shape() : roots[0]->shape();
  if (plan.mode == KernelPlan::Mode::kHorizontal) {
    for (int k = 0; k < num_outputs; ++k) {
      const Instruction* root = roots[k];
      int64_t start = plan.segment_starts[k];
      int64_t n = root->shape().NumElements();
      if (n == 0) continue;
      // This chunk's part of output k: [max(begin, start), min(end, start + n)) - start.
      llvm::Value* lo = b.CreateSub(b.CreateSelect(b.CreateICmpSGT(begin, b.getInt64(start)), begin, b.getInt64(start)),
                                    b.getInt64(start));
      llvm::Value* end_k = b.getInt64(start + n);
      llvm::Value* hi = b.CreateSub(b.CreateSelect(b.CreateICmpSLT(end, end_k), end, end_k), b.getInt64(start));
      bool flat = plan.segment_flat[k];
      const std::vector<int64_t>& dims = root->shape().dims();
      auto store_one = [&](llvm::Value* i, LaneMath& lanes) {
        IndexDim linear = lanes.LaneRamp(i);
        Index index;
        if (flat) {
          index.linear = linear;
        } else {
          index = MultiIndex(lanes, linear, dims);  // a rank-0 output: no dimensions
        }
        Val v = emitter.Emit(root, index);
        DType t = root->dtype();
        llvm::Type* storage = StorageType(ctx, t);
        llvm::Value* addr = b.CreateGEP(storage, buffers[k], linear.base);
        int width = emitter.width();
        if (width == 1) {
          b.CreateStore(StoreValue(b, t, v.v), addr);
        } else {
          b.CreateAlignedStore(StoreValue(b, t, lanes.Widen(v)), addr, llvm::Align(DTypeBytes(t)));
        }
      };
      // Only lo < hi does anything: the loops below run zero times otherwise.
      int width = plan.width;
      llvm::Value* n_k = b.CreateSub(hi, lo);
      llvm::Value* positive = b.CreateICmpSGT(n_k, b.getInt64(0));
      llvm::Value* count = b.CreateSelect(positive, n_k, b.getInt64(0));
      llvm::Value* vec_hi = b.CreateAdd(lo, b.CreateMul(b.CreateUDiv(count, b.getInt64(width)), b.getInt64(width)));
      emitter.ForLoop(lo, vec_hi, width, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        LaneMath lanes(b, width);
        store_one(i, lanes);
        return std::vector<llvm::Value*>{};
      }, "hvec", {kVectorUnroll, false});
      ElementalEmitter::WidthScope scalar(emitter, 1);
      emitter.ForLoop(vec_hi, b.CreateAdd(lo, count), 1, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        LaneMath lanes(b, 1);
        store_one(i, lanes);
        return std::vector<llvm::Value*>{};
      }, "htail", {1, false});
    }
  } else if (plan.mode == KernelPlan::Mode::kScatter) {
    EmitScatterUnits(b, emitter, roots[0], buffers[0], plan, begin, end);
  } else if (plan.mode == KernelPlan::Mode::kUpdate) {
    // The update's rows, written at the clamped start indices into the operand's buffer,
    // which is the output's: the rest of it stays as it is. A chain of updates (PlanKernel:
    // one unit) writes each in turn, all of its rows, so that a later one wins where they
    // overlap.
    auto update_rows = [&](const Instruction* dus, llvm::Value* first, llvm::Value* last) {
      updating = dus;
      const Instruction* update = dus->operand(1);
      const std::vector<int64_t>& udims = update->shape().dims();
      const std::vector<int64_t>& odims = dus->shape().dims();
      int rank = static_cast<int>(udims.size());
      std::vector<llvm::Value*> starts = emitter.DynamicUpdateStarts(dus);
      emitter.ForLoop(first, last, 1, {}, [&](llvm::Value* row, const std::vector<llvm::Value*>&) {
        std::vector<llvm::Value*> outer = OuterIndices(b, row, udims);
        if (rank == 0) {
          LaneMath lanes(b, 1);
          ElementalEmitter::WidthScope scalar(emitter, 1);
          store(0, lanes.Uniform(b.getInt64(0)), emitter.Emit(update, Index{}), 1);
          return std::vector<llvm::Value*>{};
        }
        vector_loop(b.getInt64(0), b.getInt64(udims.back()), [&](llvm::Value* j, LaneMath& lanes) {
          Index uindex, oindex;
          for (int k = 0; k < rank - 1; ++k) {
            uindex.dims.push_back(lanes.Uniform(outer[k]));
            oindex.dims.push_back(lanes.Uniform(b.CreateAdd(outer[k], starts[k])));
          }
          uindex.dims.push_back(lanes.LaneRamp(j));
          oindex.dims.push_back(lanes.LaneRamp(b.CreateAdd(j, starts[rank - 1])));
          return std::make_pair(uindex, LinearIndex(lanes, oindex, odims));
        });
        return std::vector<llvm::Value*>{};
      }, "update");
    };
    std::vector<const Instruction*> chain = InPlaceUpdates(comp);
    if (chain.size() <= 1) {
      update_rows(roots[0], begin, end);
    } else {
      for (const Instruction* dus : chain) {
        const Shape& u = dus->operand(1)->shape();
        update_rows(dus, b.getInt64(0), b.getInt64(u.rank() == 0 || u.dims().back() == 0 ? 1 : u.NumElements() / u.dims().back()));
      }
    }
  } else if (plan.mode == KernelPlan::Mode::kFlat) {
    vector_loop(begin, end, [&](llvm::Value* i, LaneMath& lanes) {
      Index index;
      // Whole vectors from a multiple of the width (the pool's chunks: whole_vector_chunks).
      index.linear = lanes.LaneRamp(i, whole_vectors ? lanes.width() : 1);
      return std::make_pair(index, *index.linear);
    }, whole_vectors);
  } else if (plan.mode == KernelPlan::Mode::kLinear1D) {
    llvm::Value* lanes_end = begin;
    if (plan.row_lanes > 1) {
      // Row reductions of short rows, one output (row) per lane; the rows left over, one
      // at a time.
      const int rows = plan.row_lanes;
      std::vector<Staged> staged = stage_operands(out_shape.dims());
      llvm::Value* n = b.CreateSub(end, begin);
      lanes_end = b.CreateAdd(begin, b.CreateMul(b.CreateUDiv(n, b.getInt64(rows)), b.getInt64(rows)));
      emitter.ForLoop(begin, lanes_end, rows, {}, [&](llvm::Value* row0, const std::vector<llvm::Value*>&) {
        ElementalEmitter::WidthScope wide(emitter, rows);
        LaneMath lanes(b, rows);
        Index index;
        index.dims.push_back(lanes.LaneRamp(row0));
        read_staged(staged, index, row0);
        emit_group(index, index.dims[0]);
        emitter.ForgetRowValues();
        return std::vector<llvm::Value*>{};
      }, "row.lanes");
    }
    vector_loop(lanes_end, end, [&](llvm::Value* i, LaneMath& lanes) {
      Index index;
      index.dims.push_back(lanes.LaneRamp(i, whole_vectors && plan.row_lanes <= 1 ? lanes.width() : 1));
      return std::make_pair(index, index.dims[0]);
    }, whole_vectors && plan.row_lanes <= 1);
  } else {
    const std::vector<int64_t>& dims = out_shape.dims();
    int rank = static_cast<int>(dims.size());
    std::vector<const Instruction*> per_row;
    for (const Instruction* i : comp.MakePostOrder()) {
      if (IsPerRowReduction(i, out_shape)) per_row.push_back(i);
    }
    // Row values kept in stack buffers (allocated here, in the entry block, once per call).
    std::vector<const Instruction*> kept =
        plan.keep_row_values ? KeptRowValues(per_row, out_shape) : std::vector<const Instruction*>{};
    std::vector<llvm::Value*> kept_rows;
    for (const Instruction* e : kept) kept_rows.push_back(stage(e->dtype(), plan.row_length, "kept." + e->name()));
    // Each per-row reduction at the rows' index `at` (`rows` of them in lanes, or one), its
    // kept operand first; the elements then find it in the emitter's cache.
    auto emit_per_row = [&](const Index& at, int rows) {
      for (const Instruction* r : per_row) {
        auto k = std::find(kept.begin(), kept.end(), r->operand(0)) - kept.begin();
        if (k < static_cast<int64_t>(kept.size())) keep_row_value(kept[k], kept_rows[k], at.dims, rows);
        if (rows > 1) {
          emitter.Emit(r, at);
        } else {
          emitter.EmitUniform(r, at);
        }
      }
    };
    auto outer_of = [&](llvm::Value* row) { return OuterIndices(b, row, dims); };
    // The index of a row's outer dimensions (`outer`, from outer_of), uniform across its
    // lanes. A unit dimension's index is the constant 0, as a broadcast or reshape asks for
    // it: the per-row reductions are then found in the cache by the elements' requests (with
    // the row's index there, a [1, rows, n] softmax recomputed each row's sums for every
    // element: n^2 work per row).
    auto outer_index = [&](const std::vector<llvm::Value*>& outer, LaneMath& lanes) {
      Index index;
      for (int k = 0; k < rank - 1; ++k) index.dims.push_back(dims[k] == 1 ? lanes.Constant(0) : lanes.Uniform(outer[k]));
      return index;
    };
    // Row `row`'s outputs in columns [first, last) (all from `first` on without `last`).
    auto emit_row = [&](llvm::Value* row, llvm::Value* first, llvm::Value* last = nullptr) {
      std::vector<llvm::Value*> outer = outer_of(row);
      llvm::Value* row_start = b.CreateMul(row, b.getInt64(plan.row_length));
      if (!per_row.empty()) {
        // Row fusion: each per-row reduction once, before the row's elements; the elements
        // find its value in the emitter's cache (uniform values serve any width).
        LaneMath lanes(b, 1);
        Index at = outer_index(outer, lanes);
        emit_per_row(at, 1);
      }
      if (rank == 0) {
        LaneMath lanes(b, 1);
        ElementalEmitter::WidthScope scalar(emitter, 1);
        emit_group(Index{}, lanes.Uniform(b.getInt64(0)));
        return;
      }
      vector_loop(first, last ? last : b.getInt64(plan.row_length), [&](llvm::Value* j, LaneMath& lanes) {
        Index index = outer_index(outer, lanes);
        // From a constant multiple of the width, the vectors start at multiples of it.
        auto* from = llvm::dyn_cast<llvm::ConstantInt>(first);
        const int64_t align = from && from->getSExtValue() % lanes.width() == 0 ? lanes.width() : 1;
        index.dims.push_back(lanes.LaneRamp(j, align));
        IndexDim linear = lanes.LaneRamp(b.CreateAdd(row_start, j), std::gcd(align, plan.row_length));
        return std::make_pair(index, linear);
      });
      emitter.ForgetRowValues();
    };
    const DotTile tile = warp ? DotTile{} : plan.dot_tile;
    llvm::Value* rows_end = begin;
    if (tile.dot) {
      // Blocks of tile.block_rows rows (DotTile); in a block, each panel of span columns
      // for all its tiles of tile.rows rows, in blocks of tile.depth_block along k whose
      // sums wait in a stack buffer for the next (the rows left over, and the columns past
      // the last full panel, as plain rows). The sums run over k in order, as EmitDot's:
      // the same bits.
      const int nr = tile.rows, nv = tile.vectors, width = plan.width;
      const int64_t span = int64_t{nv} * width;
      const int64_t tiled = plan.row_length / span * span;
      const Instruction* lhs = tile.dot->operand(0);
      const Instruction* rhs = tile.dot->operand(1);
      const int64_t depth = lhs->shape().dim(tile.lhs_transposed ? rank - 2 : rank - 1);
      const int64_t kc = tile.pack ? tile.depth_block : depth;
      const int64_t kblocks = (depth + kc - 1) / kc;
      const DType t = tile.dot->dtype();
      llvm::Type* et = RegisterType(ctx, t);
      llvm::Type* vt = WithWidth(et, width);
      auto entry_buffer = [&](int64_t elements, const char* what) -> llvm::Value* {
        llvm::IRBuilderBase::InsertPointGuard guard(b);
        llvm::BasicBlock& entry = b.GetInsertBlock()->getParent()->getEntryBlock();
        b.SetInsertPoint(&entry, entry.getFirstInsertionPt());
        auto* buffer = b.CreateAlloca(llvm::ArrayType::get(et, elements), nullptr, what);
        buffer->setAlignment(llvm::Align(64));
        return buffer;
      };
      llvm::Value* panel = tile.pack ? entry_buffer(kc * span, "dot.panel") : nullptr;
      llvm::Value* partial = kblocks > 1 ? entry_buffer(tile.block_rows * span, "dot.partial") : nullptr;
      auto vector_at = [&](llvm::Value* buffer, llvm::Value* row, int v) {
        llvm::Value* at = b.CreateAdd(b.CreateMul(row, b.getInt64(span)), b.getInt64(int64_t{v} * width));
        return b.CreateGEP(et, buffer, at);
      };
      // Vector v of the rhs panel from column j0 at k (from k0 in the packed panel).
      auto rhs_at = [&](llvm::Value* k, llvm::Value* k0, llvm::Value* j0, int v,
                        const std::vector<llvm::Value*>& outer, LaneMath& lanes, bool packed) -> llvm::Value* {
        if (packed) return b.CreateAlignedLoad(vt, vector_at(panel, b.CreateSub(k, k0), v), llvm::Align(64));
        Index ri;
        for (int d = 0; d < rank - 2; ++d) ri.dims.push_back(dims[d] == 1 ? lanes.Constant(0) : lanes.Uniform(outer[d]));
        ri.dims.push_back(lanes.Uniform(k));
        ri.dims.push_back(lanes.LaneRamp(b.CreateAdd(j0, b.getInt64(int64_t{v} * width))));
        return lanes.Widen(emitter.Emit(rhs, ri));
      };
      llvm::Value* n = b.CreateSub(end, begin);
      rows_end = b.CreateAdd(begin, b.CreateMul(b.CreateUDiv(n, b.getInt64(nr)), b.getInt64(nr)));
      emitter.ForLoop(begin, rows_end, tile.block_rows, {}, [&](llvm::Value* block0, const std::vector<llvm::Value*>&) {
        llvm::Value* next = b.CreateAdd(block0, b.getInt64(tile.block_rows));
        llvm::Value* block_end = b.CreateSelect(b.CreateICmpULT(next, rows_end), next, rows_end);
        emitter.ForLoop(b.getInt64(0), b.getInt64(tiled), span, {}, [&](llvm::Value* j0, const std::vector<llvm::Value*>&) {
          emitter.ForLoop(b.getInt64(0), b.getInt64(depth), kc, {}, [&](llvm::Value* k0, const std::vector<llvm::Value*>&) {
            llvm::Value* k_next = b.CreateAdd(k0, b.getInt64(kc));
            llvm::Value* k1 = b.CreateSelect(b.CreateICmpULT(k_next, b.getInt64(depth)), k_next, b.getInt64(depth));
            if (panel) {
              // The panel's rhs columns, k-major: read by every tile of the block from one
              // contiguous buffer (a power-of-two row stride put a column's lines in a few
              // cache sets) and computed once per block where the rhs is fused.
              std::vector<llvm::Value*> outer0 = outer_of(block0);
              emitter.ForLoop(k0, k1, 1, {}, [&](llvm::Value* k, const std::vector<llvm::Value*>&) {
                LaneMath lanes(b, width);
                for (int v = 0; v < nv; ++v) {
                  llvm::Value* y = rhs_at(k, k0, j0, v, outer0, lanes, false);
                  b.CreateAlignedStore(y, vector_at(panel, b.CreateSub(k, k0), v), llvm::Align(64));
                }
                return std::vector<llvm::Value*>{};
              }, "dot.pack");
            }
            emitter.ForLoop(block0, block_end, nr, {}, [&](llvm::Value* row0, const std::vector<llvm::Value*>&) {
              std::vector<std::vector<llvm::Value*>> outer(nr);
              for (int r = 0; r < nr; ++r) outer[r] = outer_of(b.CreateAdd(row0, b.getInt64(r)));
              auto outer_dim = [&](LaneMath& lanes, int r, int k) {
                return dims[k] == 1 ? lanes.Constant(0) : lanes.Uniform(outer[r][k]);
              };
              // The sums so far: zero in the first block of k, else from the buffer.
              llvm::Value* local = b.CreateSub(row0, block0);
              llvm::Value* zero = llvm::Constant::getNullValue(vt);
              std::vector<llvm::Value*> start(static_cast<size_t>(nr * nv), zero);
              if (partial) {
                llvm::Value* first = b.CreateICmpEQ(k0, b.getInt64(0));
                for (int r = 0; r < nr; ++r) {
                  for (int v = 0; v < nv; ++v) {
                    llvm::Value* kept = b.CreateAlignedLoad(vt, vector_at(partial, b.CreateAdd(local, b.getInt64(r)), v),
                                                            llvm::Align(64));
                    start[static_cast<size_t>(r * nv + v)] = b.CreateSelect(first, zero, kept);
                  }
                }
              }
              std::vector<llvm::Value*> sums = emitter.ForLoop(k0, k1, 1, start,
                  [&](llvm::Value* k, const std::vector<llvm::Value*>& cur) {
                    LaneMath lanes(b, width);
                    std::vector<llvm::Value*> next(cur);
                    for (int v = 0; v < nv; ++v) {
                      for (int r = 0; r < nr; ++r) {
                        Index li;
                        for (int d = 0; d < rank - 2; ++d) li.dims.push_back(outer_dim(lanes, r, d));
                        if (tile.lhs_transposed) li.dims.push_back(lanes.Uniform(k));
                        li.dims.push_back(outer_dim(lanes, r, rank - 2));
                        if (!tile.lhs_transposed) li.dims.push_back(lanes.Uniform(k));
                        llvm::Value* x = lanes.Widen(emitter.Emit(lhs, li));
                        llvm::Value* y = rhs_at(k, k0, j0, v, outer[r], lanes, panel != nullptr);
                        llvm::Value*& sum = next[static_cast<size_t>(r * nv + v)];
                        sum = IsFloat(t) ? b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {x, y, sum})
                                          : b.CreateAdd(sum, b.CreateMul(x, y));
                      }
                    }
                    return next;
                  }, "dot.k");
              llvm::BasicBlock* finish = nullptr;
              llvm::BasicBlock* merge = nullptr;
              if (partial) {
                // Not the last block of k: the sums wait in the buffer.
                llvm::Function* fn = b.GetInsertBlock()->getParent();
                llvm::BasicBlock* keep = llvm::BasicBlock::Create(ctx, "dot.keep", fn);
                finish = llvm::BasicBlock::Create(ctx, "dot.finish", fn);
                merge = llvm::BasicBlock::Create(ctx, "dot.merge", fn);
                b.CreateCondBr(b.CreateICmpULT(k1, b.getInt64(depth)), keep, finish);
                b.SetInsertPoint(keep);
                for (int r = 0; r < nr; ++r) {
                  for (int v = 0; v < nv; ++v) {
                    b.CreateAlignedStore(sums[static_cast<size_t>(r * nv + v)],
                                         vector_at(partial, b.CreateAdd(local, b.getInt64(r)), v), llvm::Align(64));
                  }
                }
                b.CreateBr(merge);
                b.SetInsertPoint(finish);
              }
              // The epilogue of each output vector, with the dot's value from its sum.
              for (int r = 0; r < nr; ++r) {
                llvm::Value* row_start = b.CreateMul(b.CreateAdd(row0, b.getInt64(r)), b.getInt64(plan.row_length));
                for (int v = 0; v < nv; ++v) {
                  LaneMath lanes(b, width);
                  llvm::Value* j = b.CreateAdd(j0, b.getInt64(int64_t{v} * width));
                  Index index;
                  for (int d = 0; d < rank - 1; ++d) index.dims.push_back(outer_dim(lanes, r, d));
                  index.dims.push_back(lanes.LaneRamp(j));
                  Val sum{sums[static_cast<size_t>(r * nv + v)], true};
                  emitter.KeepLaneRow(tile.dot, [sum, width](const Index&, int w) -> std::optional<Val> {
                    return w == width ? std::optional<Val>(sum) : std::nullopt;
                  });
                  emitter.PushScope();
                  emit_group(index, lanes.LaneRamp(b.CreateAdd(row_start, j)));
                  emitter.PopScope();
                  emitter.ForgetLaneRows();
                }
              }
              if (merge) {
                b.CreateBr(merge);
                b.SetInsertPoint(merge);
              }
              return std::vector<llvm::Value*>{};
            }, "dot.rows");
            return std::vector<llvm::Value*>{};
          }, "dot.depth");
          return std::vector<llvm::Value*>{};
        }, "dot.tile");
        if (tiled < plan.row_length) {
          emitter.ForLoop(block0, block_end, 1, {}, [&](llvm::Value* row, const std::vector<llvm::Value*>&) {
            emit_row(row, b.getInt64(tiled));
            return std::vector<llvm::Value*>{};
          }, "dot.rest");
        }
        return std::vector<llvm::Value*>{};
      }, "dot.block");
    }
    // Tiles of plan.tile_rows rows, vector by vector (PlanTiles); the columns past the last
    // whole vector, and the rows left over, as plain rows. Transposes read by blocks
    // (block_transpose.h) take tiles of `width` rows from a multiple of `width`, so that a
    // tile lies in one run of the rows' last outer dimension: for each vector of columns the
    // blocks are filled, then the tile's rows read them (a gather per vector otherwise:
    // [1000, 1000] float32, 232 us -> 64 us).
    const int width = plan.width;
    const int tile_rows = warp ? 0 : plan.tile_rows;
    TransposeBlocks blocks = tile_rows > 1 && plan.block_transposed ? AllocateTransposeBlocks(b, body, comp, width) : TransposeBlocks{};
    // Rows [first, last) of the output, columns [col0, col1) (col0 a multiple of `width`).
    auto tiled_rows = [&](llvm::Value* first_row, llvm::Value* last_row, llvm::Value* col0, llvm::Value* col1) {
      llvm::Value* t = b.getInt64(tile_rows);
      llvm::Value* vectors_end = b.CreateAdd(col0, b.CreateMul(b.CreateUDiv(b.CreateSub(col1, col0), b.getInt64(width)), b.getInt64(width)));
      llvm::Value* first = first_row;
      if (!blocks.empty()) {
        first = b.CreateMul(b.CreateUDiv(b.CreateAdd(first_row, b.getInt64(tile_rows - 1)), t), t);
        first = b.CreateSelect(b.CreateICmpULT(first, last_row), first, last_row);
        emitter.ForLoop(first_row, first, 1, {}, [&](llvm::Value* row, const std::vector<llvm::Value*>&) {
          emit_row(row, col0, col1);
          return std::vector<llvm::Value*>{};
        }, "tile.before");
      }
      llvm::Value* tiles_end = b.CreateAdd(first, b.CreateMul(b.CreateUDiv(b.CreateSub(last_row, first), t), t));
      emitter.ForLoop(first, tiles_end, tile_rows, {}, [&](llvm::Value* row0, const std::vector<llvm::Value*>&) {
        std::vector<llvm::Value*> outer0 = blocks.empty() ? std::vector<llvm::Value*>{} : outer_of(row0);
        emitter.ForLoop(col0, vectors_end, width, {}, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
          if (!blocks.empty()) FillTransposeBlocks(b, emitter, blocks, dims, outer0, j);
          emitter.ForLoop(b.getInt64(0), t, 1, {}, [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
            llvm::Value* row = b.CreateAdd(row0, r);
            LaneMath lanes(b, width);
            Index index = outer_index(outer_of(row), lanes);
            if (!blocks.empty()) ReadTransposeBlocks(b, emitter, blocks, index.dims, r);
            index.dims.push_back(lanes.LaneRamp(j));
            emitter.PushScope();
            emit_group(index, lanes.LaneRamp(b.CreateAdd(b.CreateMul(row, b.getInt64(plan.row_length)), j)));
            emitter.PopScope();
            emitter.ForgetRowValues();
            return std::vector<llvm::Value*>{};
          }, "tile.row");
          return std::vector<llvm::Value*>{};
        }, "tile.vec");
        emitter.ForLoop(b.getInt64(0), t, 1, {}, [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
          emit_row(b.CreateAdd(row0, r), vectors_end, col1);
          return std::vector<llvm::Value*>{};
        }, "tile.tail");
        return std::vector<llvm::Value*>{};
      }, blocks.empty() ? "strided.rows" : "block.rows");
      emitter.ForLoop(tiles_end, last_row, 1, {}, [&](llvm::Value* row, const std::vector<llvm::Value*>&) {
        emit_row(row, col0, col1);
        return std::vector<llvm::Value*>{};
      }, "tile.after");
    };
    if (tile_rows > 1 && plan.column_blocks > 1) {
      // Unit u is row u % rows of column block u / rows: each block the chunk touches, for
      // its rows in the chunk.
      const int64_t rows = plan.units / plan.column_blocks;
      llvm::Value* n = b.getInt64(rows);
      llvm::Value* blocks_end = b.CreateUDiv(b.CreateAdd(end, b.getInt64(rows - 1)), n);
      emitter.ForLoop(b.CreateUDiv(begin, n), blocks_end, 1, {}, [&](llvm::Value* k, const std::vector<llvm::Value*>&) {
        llvm::Value* base = b.CreateMul(k, n);
        llvm::Value* first = b.CreateSub(b.CreateSelect(b.CreateICmpUGT(begin, base), begin, base), base);
        llvm::Value* block_end = b.CreateAdd(base, n);
        llvm::Value* last = b.CreateSub(b.CreateSelect(b.CreateICmpULT(end, block_end), end, block_end), base);
        llvm::Value* col0 = b.CreateMul(k, b.getInt64(plan.column_block_length));
        llvm::Value* col1 = b.CreateAdd(col0, b.getInt64(plan.column_block_length));
        llvm::Value* length = b.getInt64(plan.row_length);
        col1 = b.CreateSelect(b.CreateICmpULT(col1, length), col1, length);
        tiled_rows(first, last, col0, col1);
        return std::vector<llvm::Value*>{};
      }, "column.block");
      rows_end = end;
    } else if (tile_rows > 1) {
      tiled_rows(begin, end, b.getInt64(0), b.getInt64(plan.row_length));
      rows_end = end;
    }
    if (plan.row_lanes > 1) {
      // Short rows, plan.row_lanes at a time, one in each lane: position j of the lanes'
      // rows is a vector, and each reduction combines its lane's row in order, as one row at
      // a time does. The block of rows is contiguous: the operands of the output's shape are
      // copied into stack buffers transposed (position-major) and the outputs copied out of
      // them, instead of strided loads and stores (gathers and scatters are slow, or absent).
      // The rows left over go one at a time.
      const int rows = plan.row_lanes;
      const int64_t length = plan.row_length;
      std::vector<Staged> staged_in = stage_operands(std::vector<int64_t>(dims.begin(), dims.end() - 1));
      std::vector<llvm::Value*> staged_out;
      for (const Instruction* r : roots) staged_out.push_back(stage(r->dtype(), length, "staged." + r->name()));
      llvm::Value* n = b.CreateSub(end, begin);
      rows_end = b.CreateAdd(begin, b.CreateMul(b.CreateUDiv(n, b.getInt64(rows)), b.getInt64(rows)));
      emitter.ForLoop(begin, rows_end, rows, {}, [&](llvm::Value* row0, const std::vector<llvm::Value*>&) {
        ElementalEmitter::WidthScope wide(emitter, rows);
        LaneMath lanes(b, rows);
        Index at = MultiIndex(lanes, lanes.LaneRamp(row0), std::vector<int64_t>(dims.begin(), dims.end() - 1));
        read_staged(staged_in, at, row0);
        emit_per_row(at, rows);
        emitter.ForLoop(b.getInt64(0), b.getInt64(length), 1, {}, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
          Index index = at;
          index.dims.push_back(lanes.Uniform(j));
          llvm::Value* position = b.CreateMul(j, b.getInt64(rows));
          std::vector<Val> values;
          for (const Instruction* r : roots) values.push_back(emitter.Emit(r, index));
          for (int k = 0; k < num_outputs; ++k) {
            StoreElements(b, staged_out[k], roots[k]->dtype(), lanes.LaneRamp(position), values[k], rows);
          }
          return std::vector<llvm::Value*>{};
        }, "lanes.row", {0, false});
        for (int k = 0; k < num_outputs; ++k) transpose(buffers[k], staged_out[k], roots[k]->dtype(), length, row0, false);
        emitter.ForgetRowValues();
        return std::vector<llvm::Value*>{};
      }, "row.lanes");
    }
    emitter.ForLoop(rows_end, end, 1, {}, [&](llvm::Value* row, const std::vector<llvm::Value*>&) {
      emit_row(row, b.getInt64(0));
      return std::vector<llvm::Value*>{};
    }, "row");
  }
  b.CreateRetVoid();
  return body;
}

llvm::Function* EmitTableWrapper(llvm::Module& module, llvm::Function* body, const std::string& name) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  int num_buffers = static_cast<int>(body->arg_size()) - 2;
  auto* wrapper_type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64}, false);
  llvm::Function* wrapper =
      llvm::Function::Create(wrapper_type, llvm::GlobalValue::ExternalLinkage, name, module);
  wrapper->addFnAttr(llvm::Attribute::NoUnwind);
  // The program calls each kernel once: inlined, thousands of kernels (an unrolled scan,
  // profile none) become one function of thousands of loops, which LLVM's loop analyses
  // take minutes over (ScalarEvolution walks the dominating conditions of each loop).
  wrapper->addFnAttr(llvm::Attribute::NoInline);
  Builder wb(llvm::BasicBlock::Create(ctx, "entry", wrapper));
  std::vector<llvm::Value*> args;
  for (int i = 0; i < num_buffers; ++i) {
    args.push_back(wb.CreateLoad(ptr, wb.CreateConstGEP1_64(ptr, wrapper->getArg(0), i)));
  }
  args.push_back(wrapper->getArg(1));
  args.push_back(wrapper->getArg(2));
  wb.CreateCall(body, args);
  wb.CreateRetVoid();
  return wrapper;
}

llvm::Function* EmitKernel(llvm::Module& module, const Instruction* fusion, const KernelPlan& plan,
                           const std::string& name, bool may_alias) {
  llvm::Function* body = plan.mode == KernelPlan::Mode::kWholeLoop
                             ? EmitWholeLoopBody(module, fusion, plan.width, name)
                             : EmitKernelBody(module, fusion, plan, name, may_alias);
  return EmitTableWrapper(module, body, name);
}

}  // namespace fj::codegen
