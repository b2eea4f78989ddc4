// Whole-loop kernel emission (see whole_loop_emitter.h).
#include "codegen/whole_loop_emitter.h"

#include <algorithm>

#include "analysis/cost_model.h"
#include "codegen/buffer_access.h"
#include "codegen/elemental.h"
#include "codegen/kernel_emitter.h"
#include "ir/computation.h"
#include "ir/whole_loop.h"
#include "support/error.h"

namespace fj::codegen {
namespace {

// Lanes a whole-loop kernel steps together: several vectors whose steps interleave.
constexpr int kGroupLanes = 64;

// Machine vectors per vector of a group's members: every op of the step then works on
// several independent vectors at once, so a step's inner loops (a policy's products, one
// chain of fused multiply-adds per hidden unit) carry several chains instead of waiting on
// one. 2048 CartPole environments on AVX2: the policy 2.4e7 -> 4.1e7 env-steps/s, no_concat
// 7.0e8 -> 8.2e8. A long step keeps more values live than AVX2's 16 vector registers hold
// for 4 (the baseline's threefry rounds: 8% slower with 4, 3% faster with 2); AVX-512's 32
// (16 lanes of 32 bits) hold them: the baseline 10% faster with 4 (Zen 4, medians of 15,
// three runs each), the policy and no_concat unchanged.
int WideFactor(const Computation& step, int width) {
  int ops = 0;
  for (const Instruction* i : step.MakePostOrder()) {
    ops += i->opcode() != Opcode::kParameter && i->opcode() != Opcode::kConstant ? 1 : 0;
  }
  return ops > 256 && width < 16 ? 2 : 4;
}

}  // namespace

int64_t WholeLoopLanes(const Instruction* fusion) {
  WholeLoopLayout l = GetWholeLoopLayout(fusion->attrs(), *fusion->fused_computation());
  int64_t n = 1;
  for (int64_t d : l.lanes) n *= d;
  return n;
}

WholeLoopVectors PlanWholeLoopVectors(const Instruction* fusion, int width) {
  const Computation& step = *fusion->fused_computation();
  WholeLoopLayout l = GetWholeLoopLayout(fusion->attrs(), step);
  const int64_t lanes_n = WholeLoopLanes(fusion);
  WholeLoopVectors v;
  v.narrow = lanes_n >= width ? width : 1;
  v.wide = v.narrow;
  for (int k = WideFactor(step, width); k > 1 && v.wide == v.narrow; k /= 2) {
    if (v.narrow > 1 && lanes_n >= v.narrow * k && (l.reductions == 0 || l.block_lanes % (v.narrow * k) == 0)) {
      v.wide = v.narrow * k;
    }
  }
  v.group = v.wide > 1 ? std::max(1, kGroupLanes / v.wide) : 1;
  // Whole groups and whole blocks; but for few lanes (64 environments) at least 4 chunks,
  // so that the threads share them (one chunk of 64 ran 1.5x slower than 4 of 16).
  const int64_t unit = l.reductions > 0 ? l.block_lanes : v.wide;
  const int64_t lanes = static_cast<int64_t>(v.wide) * v.group;
  v.span = (lanes + unit - 1) / unit * unit;
  if (lanes_n < 4 * v.span) v.span = std::max(unit, lanes_n / 4 / unit * unit);
  return v;
}

llvm::Function* EmitWholeLoopBody(llvm::Module& module, const Instruction* fusion, int width,
                                  const std::string& name, const WarpCooperation* warp) {
  llvm::LLVMContext& ctx = module.getContext();
  const Computation& step = *fusion->fused_computation();
  const Instruction* root = step.root();
  WholeLoopLayout l = GetWholeLoopLayout(fusion->attrs(), step);
  const int states = l.carries + l.uniform_carries;
  const int num_outputs = static_cast<int>(fusion->shape().tuple_shapes().size());
  const int counter_param = step.num_parameters() - 1;
  const int64_t lanes_n = WholeLoopLanes(fusion);
  const int64_t steps = l.trip_count;

  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  const int num_buffers = num_outputs + fusion->operand_count();
  std::vector<llvm::Type*> params(num_buffers, ptr);
  params.push_back(i64);
  params.push_back(i64);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  llvm::Function* fn = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name + ".body", module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  Builder b(llvm::BasicBlock::Create(ctx, "entry", fn));
  WarpCooperation warp_here;
  if (warp) {
    warp_here = *warp;
    warp_here.lane = warp->lane_id(b);
    warp = &warp_here;
  }
  std::vector<llvm::Value*> buffers;
  for (int i = 0; i < num_buffers; ++i) buffers.push_back(fn->getArg(i));
  llvm::Value* begin = fn->getArg(num_buffers);
  llvm::Value* end = fn->getArg(num_buffers + 1);
  auto output = [&](int k) { return buffers[k]; };
  auto operand = [&](int i) { return buffers[num_outputs + i]; };

  // The state of the step being emitted, read by the emitter through its parameters.
  std::vector<llvm::Value*> current;
  llvm::Value* counter = nullptr;
  int lanes_width = 1;
  // Uniform carries live in small stack arrays during a step, so any index reads them.
  std::vector<llvm::Value*> uniform_slots;
  {
    llvm::IRBuilderBase::InsertPoint ip = b.saveIP();
    for (int u = 0; u < l.uniform_carries; ++u) {
      const Shape& s = step.parameter(l.carries + u)->shape();
      uniform_slots.push_back(b.CreateAlloca(llvm::ArrayType::get(StorageType(ctx, s.dtype()), s.NumElements())));
    }
    b.restoreIP(ip);
  }
  // (The emitter hands its reader the step's parameters and its array constants: a padded
  // one-element constant, x.at[1].set(v)'s mask, read as carry 0 gave wrong answers.)
  auto reader = [&](const Instruction* p, const Index& index, int w) -> Val {
    LaneMath lanes(b, w);
    if (p->opcode() == Opcode::kConstant) {
      const std::vector<int64_t>& dims = p->shape().dims();
      IndexDim linear = dims.empty() ? lanes.Constant(0) : LinearIndex(lanes, index, dims);
      return LoadElements(b, ConstantGlobal(module, p), p->dtype(), linear, w);
    }
    int number = static_cast<int>(p->parameter_number());
    if (number < l.carries) return {current[number], lanes_width > 1};
    if (number == counter_param) return {counter, false};
    const std::vector<int64_t>& dims = p->shape().dims();
    IndexDim linear = dims.empty() ? lanes.Constant(0) : LinearIndex(lanes, index, dims);
    if (number < states) return LoadElements(b, uniform_slots[number - l.carries], p->dtype(), linear, w);
    return LoadElements(b, operand(number), p->dtype(), linear, w);
  };

  const WholeLoopVectors vectors = PlanWholeLoopVectors(fusion, width);

  // The values a step keeps (KeptValues): each lane's rows, in stack buffers laid out
  // [row position][lane] for the widest vector, refilled for each vector of lanes; and the
  // values the lanes share, computed once a step into stack buffers of their own.
  const KeptStepValues keeps = KeptValues(fusion->attrs(), step);
  const std::vector<const Instruction*>& kept = keeps.lane_rows;
  const LaneDims lane_dims = kept.empty() ? LaneDims{} : StepLaneDims(fusion->attrs(), step);
  std::vector<int64_t> lane_sizes;
  for (int64_t d : l.lanes) if (d != 1) lane_sizes.push_back(d);
  std::vector<llvm::Value*> kept_rows;
  std::vector<llvm::Value*> kept_uniform;
  {
    llvm::IRBuilderBase::InsertPoint ip = b.saveIP();
    for (const Instruction* x : kept) {
      int64_t row = x->shape().NumElements() / lanes_n;
      auto* buffer = b.CreateAlloca(llvm::ArrayType::get(StorageType(ctx, x->dtype()), row * std::max(vectors.wide, width)), nullptr,
                                    "lane_row." + x->name());
      buffer->setAlignment(llvm::Align(64));
      kept_rows.push_back(buffer);
    }
    for (const Instruction* x : keeps.uniform) {
      auto* buffer = b.CreateAlloca(llvm::ArrayType::get(StorageType(ctx, x->dtype()), x->shape().NumElements()), nullptr,
                                    "shared." + x->name());
      buffer->setAlignment(llvm::Align(64));
      kept_uniform.push_back(buffer);
    }
    b.restoreIP(ip);
  }
  // Tells the emitter where the first `count` shared values kept this step are (any index,
  // any width).
  auto read_kept_uniform = [&](ElementalEmitter& emitter, size_t count) {
    for (size_t k = 0; k < count; ++k) {
      const Instruction* x = keeps.uniform[k];
      llvm::Value* buffer = kept_uniform[k];
      emitter.KeepLaneRow(x, [&b, x, buffer](const Index& index, int width) -> std::optional<Val> {
        LaneMath at(b, width);
        const std::vector<int64_t>& dims = x->shape().dims();
        IndexDim linear = dims.empty() ? at.Constant(0) : index.linear ? *index.linear : LinearIndex(at, index, dims);
        return LoadElements(b, buffer, x->dtype(), linear, width);
      });
    }
  };
  // Computes them from the state in the uniform carries' slots and the counter, producers
  // first, each element once.
  auto keep_uniform = [&](ElementalEmitter& emitter) {
    emitter.ForgetLaneRows();
    for (size_t k = 0; k < keeps.uniform.size(); ++k) {
      const Instruction* x = keeps.uniform[k];
      llvm::Value* buffer = kept_uniform[k];
      ElementalEmitter::WidthScope scalar(emitter, 1);
      emitter.ForLoop(b.getInt64(0), b.getInt64(x->shape().NumElements()), 1, {},
                      [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
        LaneMath one(b, 1);
        const std::vector<int64_t>& dims = x->shape().dims();
        Index at = dims.empty() ? Index{} : MultiIndex(one, one.Uniform(j), dims);
        StoreElements(b, buffer, x->dtype(), one.Uniform(j), emitter.Emit(x, at), 1);
        return std::vector<llvm::Value*>{};
      }, "uniform", {0, false});
      read_kept_uniform(emitter, k + 1);
    }
  };
  // Computes the kept rows of the `w` lanes from `lane` and tells the emitter where they are.
  auto keep_lane_rows = [&](ElementalEmitter& emitter, const IndexDim& lane, int w) {
    emitter.ForgetLaneRows();
    read_kept_uniform(emitter, keeps.uniform.size());
    LaneMath lanes(b, w);
    std::vector<IndexDim> lane_at = lane_sizes.size() <= 1 ? std::vector<IndexDim>{lane} : MultiIndex(lanes, lane, lane_sizes).dims;
    for (size_t k = 0; k < kept.size(); ++k) {
      const Instruction* x = kept[k];
      const std::vector<int64_t>& at_lanes = lane_dims.at(x);
      std::vector<int64_t> row_dims, row_sizes;
      for (int d = 0; d < x->shape().rank(); ++d) {
        if (std::find(at_lanes.begin(), at_lanes.end(), d) != at_lanes.end()) continue;
        row_dims.push_back(d);
        row_sizes.push_back(x->shape().dim(d));
      }
      llvm::Value* buffer = kept_rows[k];
      DType t = x->dtype();
      emitter.ForLoop(b.getInt64(0), b.getInt64(x->shape().NumElements() / lanes_n), 1, {},
                      [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
        LaneMath one(b, 1);
        Index in_row = MultiIndex(one, one.Uniform(r), row_sizes);
        Index at;
        at.dims.resize(x->shape().rank());
        for (size_t j = 0; j < at_lanes.size(); ++j) at.dims[at_lanes[j]] = lane_at[j];
        for (size_t j = 0; j < row_dims.size(); ++j) at.dims[row_dims[j]] = in_row.dims[j];
        Val v = emitter.Emit(x, at);
        StoreElements(b, buffer, t, lanes.LaneRamp(b.CreateMul(r, b.getInt64(w))), {lanes.Widen(v), w > 1}, w);
        return std::vector<llvm::Value*>{};
      }, "lane_row", {0, false});
      emitter.KeepLaneRow(x, [&b, x, buffer, row_dims, row_sizes, w](const Index& index, int width) -> std::optional<Val> {
        if (width != w) return std::nullopt;
        LaneMath at(b, width);
        Index idx = index.dims.empty() && index.linear ? MultiIndex(at, *index.linear, x->shape().dims()) : index;
        if (static_cast<int>(idx.dims.size()) != x->shape().rank()) return std::nullopt;
        llvm::Value* offset = b.getInt64(0);
        for (size_t j = 0; j < row_dims.size(); ++j) {
          const IndexDim& d = idx.dims[row_dims[j]];
          if (!d.uniform()) return std::nullopt;
          offset = b.CreateAdd(b.CreateMul(offset, b.getInt64(row_sizes[j])), d.base);
        }
        return LoadElements(b, buffer, x->dtype(), at.LaneRamp(b.CreateMul(offset, b.getInt64(width))), width);
      });
    }
  };

  int64_t block = l.block_lanes;
  // GPU: [begin, end) are a warp's lanes, one per thread; each block of partial results is
  // one warp's, written once per step by its lane 0 after the shuffles (no initialisation).
  // Lanes past the end run along on the last lane's values, so that all take part.
  FJ_CHECK(!warp || l.reductions == 0 || block == warp->lanes, "a GPU whole-loop block is one warp");
  llvm::Value* active = nullptr;
  if (warp) {
    llvm::Value* lane = b.CreateAdd(begin, warp->lane);
    active = b.CreateICmpSLT(lane, b.getInt64(lanes_n));
    begin = b.CreateSelect(active, lane, b.getInt64(lanes_n - 1));
    end = b.CreateAdd(begin, b.getInt64(1));
  }
  // Stores of lane values happen only for lanes in range.
  auto guarded = [&](llvm::Value* cond, const std::function<void()>& emit) {
    if (!cond) return emit();
    llvm::BasicBlock* yes = llvm::BasicBlock::Create(ctx, "store", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "store.done", fn);
    b.CreateCondBr(cond, yes, done);
    b.SetInsertPoint(yes);
    emit();
    b.CreateBr(done);
    b.SetInsertPoint(done);
  };
  if (l.reductions > 0 && !warp) {
    // This call's blocks of partial results start from the combiner's identity.
    llvm::Value* first = b.CreateMul(b.CreateUDiv(begin, b.getInt64(block)), b.getInt64(steps));
    llvm::Value* last = b.CreateMul(b.CreateUDiv(b.CreateAdd(end, b.getInt64(block - 1)), b.getInt64(block)), b.getInt64(steps));
    for (int r = 0; r < l.reductions; ++r) {
      const Instruction* reduce = root->operand(states + 2 * l.lane_outputs + 2 * r);
      ElementalEmitter e(b, reader, 1);
      llvm::Value* identity = e.Emit(reduce->operand(1), Index{}).v;
      llvm::Value* buf = output(states + l.lane_outputs + r);
      DType t = reduce->dtype();
      e.ForLoop(first, last, 1, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        b.CreateStore(StoreValue(b, t, identity), b.CreateGEP(StorageType(ctx, t), buf, i));
        return std::vector<llvm::Value*>{};
      }, "partials.init", {1, false});
    }
  }

  // Lanes [lo, hi) in steps of `group` vectors of `w` lanes: the vectors of a group run
  // each step together (independent dependency chains side by side, and neighbouring xs
  // and ys elements in the same cache lines), sharing the uniform state.
  // `clamped`: [lo, hi) are fewer lanes than a vector, which steps as one: its lanes past
  // `hi` run along on lane hi - 1's values (every store of theirs writes that lane's value
  // again, and reductions leave them out), as one iteration instead of one per lane (each
  // computing the shared values of the step again).
  auto emit_lanes = [&](llvm::Value* lo, llvm::Value* hi, int w, int group, bool clamped = false) {
    ElementalEmitter emitter(b, reader, w, w);
    emitter.ForLoop(lo, hi, static_cast<int64_t>(w) * group, {}, [&](llvm::Value* e, const std::vector<llvm::Value*>&) {
      LaneMath lanes(b, w);
      // Each member's lanes, as a linear position: lane-shaped values may differ in unit
      // dimensions ([N], [1, N]); ops that need dimensions derive them, and a row of xs
      // read at [t, lane] stays a vector load (MultiIndex keeps the ramp).
      std::vector<IndexDim> lane(group);
      std::vector<Index> at(group);
      std::vector<llvm::Value*> block_index(group);
      for (int g = 0; g < group; ++g) {
        llvm::Value* first = b.CreateAdd(e, b.getInt64(static_cast<int64_t>(g) * w));
        lane[g] = l.lanes.empty() ? lanes.Constant(0) : lanes.LaneRamp(first);
        if (clamped) {
          llvm::Value* last = lanes.Splat(b.CreateSub(hi, b.getInt64(1)));
          lane[g] = IndexDim{first, 0, b.CreateBinaryIntrinsic(llvm::Intrinsic::umin, lanes.Materialize(lane[g]), last)};
        }
        at[g].linear = lane[g];  // also for lanes [] next to values of shape [1]
        block_index[g] = b.CreateUDiv(first, b.getInt64(block));
      }
      // Carried: each member's lane carries, then the uniform carries' elements.
      std::vector<llvm::Value*> init;
      for (int g = 0; g < group; ++g) {
        for (int c = 0; c < l.carries; ++c) {
          init.push_back(lanes.Widen(LoadElements(b, operand(c), step.parameter(c)->dtype(), lane[g], w)));
        }
      }
      std::vector<int64_t> uniform_sizes;
      for (int u = 0; u < l.uniform_carries; ++u) {
        const Instruction* p = step.parameter(l.carries + u);
        uniform_sizes.push_back(p->shape().NumElements());
        for (int64_t j = 0; j < uniform_sizes.back(); ++j) {
          init.push_back(LoadElements(b, operand(l.carries + u), p->dtype(), lanes.Constant(j), 1).v);
        }
      }
      lanes_width = w;
      const size_t uniform_at = static_cast<size_t>(group) * l.carries;
      // The uniform carries of the state `cur` into their slots, where the step reads them.
      auto store_uniform = [&](const std::vector<llvm::Value*>& cur) {
        size_t at_cur = uniform_at;
        for (int u = 0; u < l.uniform_carries; ++u) {
          DType ut = step.parameter(l.carries + u)->dtype();
          for (int64_t j = 0; j < uniform_sizes[u]; ++j) {
            b.CreateStore(StoreValue(b, ut, cur[at_cur++]), b.CreateConstGEP1_64(StorageType(ctx, ut), uniform_slots[u], j));
          }
        }
      };
      // One step from `cur`, whose uniform carries are in their slots.
      auto one_step = [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
            const Instruction* cp = step.parameter(counter_param);
            counter = b.CreateIntCast(b.CreateAdd(t, b.getInt64(l.start)), RegisterType(ctx, cp->dtype()), true);
            std::vector<llvm::Value*> next(cur.size());
            if (!keeps.uniform.empty()) keep_uniform(emitter);
            for (int g = 0; g < group; ++g) {
              current.assign(cur.begin() + g * l.carries, cur.begin() + (g + 1) * l.carries);
              if (!kept.empty()) keep_lane_rows(emitter, lane[g], w);
              for (int c = 0; c < l.carries; ++c) next[g * l.carries + c] = lanes.Widen(emitter.Emit(root->operand(c), at[g]));
              for (int o = 0; o < l.lane_outputs; ++o) {
                const Instruction* value = root->operand(states + 2 * o);
                Val v = emitter.Emit(value, at[g]);
                llvm::Value* row = b.CreateSExt(emitter.EmitUniform(root->operand(states + 2 * o + 1), Index{}).v, i64);
                IndexDim where = lanes.Add(lanes.Uniform(b.CreateMul(row, b.getInt64(lanes_n))), lane[g]);
                guarded(active, [&] { StoreElements(b, output(states + o), value->dtype(), where, v, w); });
              }
              for (int r = 0; r < l.reductions; ++r) {
                const Instruction* reduce = root->operand(states + 2 * l.lane_outputs + 2 * r);
                const Computation& combiner = *reduce->to_apply();
                Val v = emitter.Emit(reduce->operand(0), at[g]);
                if (clamped) {
                  llvm::Value* in_range = b.CreateICmpULT(lanes.Materialize(lanes.LaneRamp(b.CreateAdd(e, b.getInt64(static_cast<int64_t>(g) * w)))),
                                                          lanes.Splat(hi));
                  v = {b.CreateSelect(in_range, lanes.Widen(v), lanes.Widen(emitter.Emit(reduce->operand(1), Index{}))), true};
                }
                llvm::Value* sum = w > 1 ? emitter.HorizontalCombine(combiner, lanes.Widen(v)) : v.v;
                llvm::Value* row = b.CreateSExt(emitter.EmitUniform(root->operand(states + 2 * l.lane_outputs + 2 * r + 1), Index{}).v, i64);
                DType t_r = reduce->dtype();
                IndexDim slot = LaneMath(b, 1).Uniform(b.CreateAdd(b.CreateMul(block_index[g], b.getInt64(steps)), row));
                if (warp) {
                  // Lanes out of range add the combiner's identity; then the warp's butterfly.
                  sum = b.CreateSelect(active, sum, emitter.Emit(reduce->operand(1), Index{}).v);
                  for (int mask = warp->lanes / 2; mask >= 1; mask /= 2) {
                    sum = emitter.EmitCombiner(combiner, sum, warp->shuffle_xor(b, sum, mask));
                  }
                  guarded(b.CreateICmpEQ(warp->lane, b.getInt64(0)), [&] {
                    StoreElements(b, output(states + l.lane_outputs + r), t_r, slot, {sum, false}, 1);
                  });
                  continue;
                }
                Val old = LoadElements(b, output(states + l.lane_outputs + r), t_r, slot, 1);
                StoreElements(b, output(states + l.lane_outputs + r), t_r, slot,
                              {emitter.EmitCombiner(combiner, old.v, sum), false}, 1);
              }
            }
            size_t next_uniform = uniform_at;
            for (int u = 0; u < l.uniform_carries; ++u) {
              const Instruction* value = root->operand(l.carries + u);
              ElementalEmitter::WidthScope scalar(emitter, 1);
              LaneMath one(b, 1);
              const std::vector<int64_t>& dims = value->shape().dims();
              for (int64_t j = 0; j < uniform_sizes[u]; ++j) {
                Index idx = dims.empty() ? Index{} : MultiIndex(one, one.Constant(j), dims);
                next[next_uniform++] = emitter.Emit(value, idx).v;
              }
            }
            return next;
          };
      std::vector<llvm::Value*> finals;
      if (l.predicate >= 0) {
        // Until the lanes are done: the group steps while any of its lanes' predicates holds
        // (a step leaves the others as they are).
        const Instruction* predicate = root->operand(l.predicate);
        auto any_running = [&](const std::vector<llvm::Value*>& cur) {
          llvm::Value* any = b.getFalse();
          emitter.ForgetLaneRows();
          store_uniform(cur);   // (the step that follows reads them there too)
          if (predicate->shape().rank() == 0 && lanes_n > 1) {
            ElementalEmitter::WidthScope scalar(emitter, 1);
            return emitter.Emit(predicate, Index{}).v;   // the same for every lane
          }
          for (int g = 0; g < group; ++g) {
            current.assign(cur.begin() + g * l.carries, cur.begin() + (g + 1) * l.carries);
            llvm::Value* running = lanes.Widen(emitter.Emit(predicate, at[g]));
            any = b.CreateOr(any, running->getType()->isVectorTy() ? b.CreateOrReduce(running) : running);
          }
          return any;
        };
        finals = emitter.WhileLoop(init, any_running, [&](const std::vector<llvm::Value*>& cur) {
          return one_step(b.getInt64(0), cur);
        }, "steps");
      } else {
        finals = emitter.ForLoop(b.getInt64(0), b.getInt64(steps), 1, init,
                                 [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
                                   store_uniform(cur);
                                   return one_step(t, cur);
                                 }, "step", {1, false});
      }
      guarded(active, [&] {
        for (int g = 0; g < group; ++g) {
          for (int c = 0; c < l.carries; ++c) {
            StoreElements(b, output(c), root->operand(c)->dtype(), lane[g], {finals[g * l.carries + c], w > 1}, w);
          }
        }
      });
      if (l.uniform_carries > 0) {
        // Every group computed the same uniform state; the one holding lane 0 stores it.
        llvm::BasicBlock* store_bb = llvm::BasicBlock::Create(ctx, "uniform.store", fn);
        llvm::BasicBlock* done_bb = llvm::BasicBlock::Create(ctx, "uniform.done", fn);
        llvm::Value* first_lane = b.CreateICmpEQ(e, b.getInt64(0));
        b.CreateCondBr(active ? b.CreateAnd(first_lane, active) : first_lane, store_bb, done_bb);
        b.SetInsertPoint(store_bb);
        size_t at_final = uniform_at;
        for (int u = 0; u < l.uniform_carries; ++u) {
          DType t = root->operand(l.carries + u)->dtype();
          for (int64_t j = 0; j < uniform_sizes[u]; ++j) {
            StoreElements(b, output(l.carries + u), t, LaneMath(b, 1).Constant(j), {finals[at_final++], false}, 1);
          }
        }
        b.CreateBr(done_bb);
        b.SetInsertPoint(done_bb);
      }
      return std::vector<llvm::Value*>{};
    }, "lanes", {1, false});
  };
  if (warp) {
    emit_lanes(begin, end, 1, 1);
    b.CreateRetVoid();
    return fn;
  }
  // Groups of wide vectors while whole groups fit, then single wide vectors, then single
  // machine vectors, then the lanes left over as one machine vector (a single lane alone;
  // with fewer lanes than a vector, single lanes).
  llvm::Value* lo = begin;
  auto whole = [&](llvm::Value* from, int64_t span) {
    return b.CreateAdd(from, b.CreateMul(b.CreateUDiv(b.CreateSub(end, from), b.getInt64(span)), b.getInt64(span)));
  };
  if (vectors.wide > 1 && vectors.group > 1) {
    llvm::Value* group_end = whole(lo, static_cast<int64_t>(vectors.wide) * vectors.group);
    emit_lanes(lo, group_end, vectors.wide, vectors.group);
    lo = group_end;
  }
  if (vectors.wide > vectors.narrow) {
    llvm::Value* wide_end = whole(lo, vectors.wide);
    emit_lanes(lo, wide_end, vectors.wide, 1);
    lo = wide_end;
  }
  if (vectors.narrow > 1) {
    llvm::Value* vec_end = whole(lo, vectors.narrow);
    emit_lanes(lo, vec_end, vectors.narrow, 1);
    // Threads' chunks end at whole vectors but for the last: only it has lanes left over.
    const int64_t left = lanes_n % vectors.narrow;
    if (left > 1) emit_lanes(vec_end, end, vectors.narrow, 1, /*clamped=*/true);
    if (left == 1) emit_lanes(vec_end, end, 1, 1);
  } else {
    emit_lanes(lo, end, 1, 1);
  }
  b.CreateRetVoid();
  return fn;
}

}  // namespace fj::codegen
