// The elemental emitter: computes the value of any instruction of a fused computation at a
// given output index, recursing into its operands with the index mapped through
// broadcasts, transposes, slices, concatenates, reshapes and the like, and emitting loops
// for the reductions, arg-reductions and dots it meets. Kernel emitters (kernel_emitter.cc)
// drive it with the index of each group of `width` output elements.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/llvm_util.h"
#include "ir/computation.h"
#include "support/target.h"

namespace fj::codegen {

// An index into an array: per-dimension, or (for kernels whose accesses all follow the
// output's row-major order) only the linear position.
struct Index {
  std::vector<IndexDim> dims;
  std::optional<IndexDim> linear;
  bool operator==(const Index& o) const;
};

// Hints for LLVM's loop passes: `unroll` copies of the body per trip (0: LLVM decides, 1:
// none); `vectorize` false for loops already written with vectors, or remainders.
struct LoopHints {
  int unroll = 0;
  bool vectorize = true;
};

// The lanes of a GPU warp reducing together: each takes every `lanes`-th element of the
// innermost reduced dimension from `lane` on, then the partial results are combined across
// the warp by butterfly shuffles (a fixed order: results do not depend on timing).
struct WarpCooperation {
  // Emits the lane's number (i64, 0 .. lanes - 1); a kernel body calls it once, at its
  // entry, and keeps the value in `lane`.
  std::function<llvm::Value*(Builder& b)> lane_id;
  llvm::Value* lane = nullptr;
  int lanes = 32;
  // The value `v` (a scalar) of the lane whose number is this lane's xor `mask`.
  std::function<llvm::Value*(Builder& b, llvm::Value* v, int mask)> shuffle_xor;
};

class ElementalEmitter {
 public:
  // Loads the element at `index` from the buffer of a fused parameter or array constant.
  using BufferReader = std::function<Val(const Instruction* source, const Index& index, int width)>;

  // `width`: lanes of the output index; `reduction_width`: lanes a row reduction uses for
  // its reduced dimension when its output is walked one element at a time.
  ElementalEmitter(Builder& b, BufferReader reader, int width, int reduction_width = 1);

  Val Emit(const Instruction* instr, const Index& index);
  int width() const { return width_; }
  // f16 <-> f32 conversions by the target's instructions (fpext/fptrunc of half) instead
  // of integer code: only where the target has them (x86 F16C), else LLVM calls libgcc.
  void set_native_half(bool native) { native_half_ = native; }
  Builder& builder() { return b_; }

  // The elementwise semantics, shared with combiners: `dtype` is the operands' type.
  llvm::Value* EmitUnaryOp(Opcode op, DType in, DType out, llvm::Value* x);
  llvm::Value* EmitBinaryOp(Opcode op, DType dtype, ComparisonDirection dir, llvm::Value* a,
                            llvm::Value* b);
  // float -> int conversion that saturates at the type's range and maps NaN to 0.
  llvm::Value* SaturatingFloatToInt(llvm::Value* x, DType in, DType out, llvm::Type* to);
  // Conversions to and from f16/bf16 (i16 bits in registers), through f32 as XLA converts
  // (f64 -> f32 -> f16 rounds twice), by the steps of
  // support/float16.h so that compiled and constant-folded values agree bit for bit.
  llvm::Value* EmitLowPrecisionConvert(llvm::Value* x, DType in, DType out);
  llvm::Value* EmitToF32(llvm::Value* bits, DType in);
  llvm::Value* EmitFromF32(llvm::Value* x, DType out);
  // Applies a scalar combiner computation (e.g. add) to two values of the same form.
  llvm::Value* EmitCombiner(const Computation& combiner, llvm::Value* a, llvm::Value* b);
  // Folds the lanes of a vector with a combiner.
  llvm::Value* HorizontalCombine(const Computation& combiner, llvm::Value* v);

  // for (i = start; i < end; i += step) with loop-carried values; returns their final
  // values. `body` gets i and the carried values and returns the next ones. (A WhileLoop
  // whose first carried value is i.)
  using LoopBody = std::function<std::vector<llvm::Value*>(llvm::Value* i,
                                                           const std::vector<llvm::Value*>&)>;
  std::vector<llvm::Value*> ForLoop(llvm::Value* start, llvm::Value* end, int64_t step,
                                    const std::vector<llvm::Value*>& init, const LoopBody& body,
                                    const char* name = "loop", LoopHints hints = {});

  // while (cond(carried)) carried = body(carried), with `cond` (an i1) emitted at the
  // loop's head; returns the final carried values.
  using WhileCond = std::function<llvm::Value*(const std::vector<llvm::Value*>&)>;
  using WhileBody = std::function<std::vector<llvm::Value*>(const std::vector<llvm::Value*>&)>;
  std::vector<llvm::Value*> WhileLoop(const std::vector<llvm::Value*>& init, const WhileCond& cond,
                                      const WhileBody& body, const char* name = "while", LoopHints hints = {});

  // Scopes the value cache: values computed inside a loop body or a branch must not be
  // reused after it.
  void PushScope() { scopes_.emplace_back(); }
  void PopScope() { scopes_.pop_back(); }

  // The start indices of a dynamic-update-slice, clamped so the update fits (uniform i64).
  std::vector<llvm::Value*> DynamicUpdateStarts(const Instruction* dus) {
    return StartIndices(dus, 2, dus->operand(1)->shape().dims());
  }

  // Temporarily changes the number of lanes (e.g. the scalar tail of a vector loop).
  // Emits `instr` at a uniform `index` as one scalar, cached in the current scope, where
  // later vector steps find it (e.g. a per-row reduction before the row's elements).
  Val EmitUniform(const Instruction* instr, const Index& index) {
    int saved = width_;
    width_ = 1;
    Val v = Emit(instr, index);
    width_ = saved;
    return v;
  }

  // A value of a row-fused kernel kept for the row (or the lanes' rows) being walked: where
  // `instr` is indexed in that row (its leading dimensions at `outer`), `read` loads it at
  // the position in the last dimension instead of computing it again.
  struct RowValue {
    std::vector<IndexDim> outer;
    std::function<Val(const IndexDim& position, int width)> read;
  };
  void KeepRowValue(const Instruction* instr, RowValue value) { row_values_[instr] = std::move(value); }

  // Called by the loops of reduction `reduce` at each position of its operand it combines
  // (`width` lanes from the position `index`): a kernel stores the outputs it computes in
  // the reduction's operand space there, so each of them is computed exactly once per
  // element, in the same loop (a reduction with side outputs).
  using ReduceVisitor = std::function<void(const Index& index, int width)>;
  void VisitReduction(const Instruction* reduce, ReduceVisitor visit) {
    visited_reduce_ = reduce;
    reduce_visitor_ = std::move(visit);
  }
  bool KeepsRowValue(const Instruction* instr) const { return row_values_.count(instr) > 0; }
  // A whole-loop step's kept lane row (KeptLaneRows): `read` loads `instr` at `index` (`width`
  // lanes) from where the step stored the current lanes' row, or gives nothing where it
  // cannot (then the value is computed).
  using LaneRowRead = std::function<std::optional<Val>(const Index& index, int width)>;
  void KeepLaneRow(const Instruction* instr, LaneRowRead read) { lane_rows_[instr] = std::move(read); }
  void ForgetLaneRows() { lane_rows_.clear(); }

  // GPU: the reductions the lanes of a warp compute together when they are emitted at a
  // warp-uniform index (the row's reductions, a row reduction's outputs). Every lane gets
  // the result. Reductions emitted inside such a reduction's loop are each lane's own.
  void CooperateOn(const WarpCooperation* warp, std::vector<const Instruction*> reductions) {
    warp_ = warp;
    cooperative_ = std::move(reductions);
  }
  // Marks code where the lanes of a warp work on different elements (a row split between
  // them): a reduction met there, even one of the list, is each lane's own (no shuffles).
  class DivergentScope {
   public:
    explicit DivergentScope(ElementalEmitter& e) : e_(e), saved_(e.in_lane_loop_) { e.in_lane_loop_ = true; }
    ~DivergentScope() { e_.in_lane_loop_ = saved_; }

   private:
    ElementalEmitter& e_;
    bool saved_;
  };
  void ForgetRowValues() { row_values_.clear(); }

  class WidthScope {
   public:
    WidthScope(ElementalEmitter& e, int width) : e_(e), saved_(e.width_) {
      e.width_ = width;
      e.PushScope();
    }
    ~WidthScope() {
      e_.PopScope();
      e_.width_ = saved_;
    }

   private:
    ElementalEmitter& e_;
    int saved_;
  };

 private:
  Val EmitUncached(const Instruction* instr, const Index& index);
  Val EmitElementwise(const Instruction* instr, const Index& index);
  llvm::Value* HiddenFromScalarEvolution(llvm::Value* v);
  Val EmitIota(const Instruction* instr, const Index& index);
  Val EmitReshape(const Instruction* instr, const Index& index);
  Val EmitConcatenate(const Instruction* instr, const Index& index);
  Val EmitPad(const Instruction* instr, const Index& index);
  Val EmitDynamicSlice(const Instruction* instr, const Index& index);
  Val EmitGather(const Instruction* instr, const Index& index);
  Val EmitDynamicUpdateSlice(const Instruction* instr, const Index& index);
  Val EmitReduce(const Instruction* instr, const Index& index);
  Val EmitArgReduce(const Instruction* instr, const Index& index);
  Val EmitDot(const Instruction* instr, const Index& index);
  // select(p, a, b) with a (k = 1) or b (k = 2) costly and needed by nothing else: computed
  // only when some lane takes it (an environment's reset state, drawn only when one is done).
  int LazySelectOperand(const Instruction* select);
  // The values only selects on `pred` read, as their operand k (1 or 2), directly or not.
  const std::unordered_set<const Instruction*>& GuardedBy(const Instruction* pred, int k);
  // Inputs of a lazy select's operand that other users need at the same index (computed
  // before its branch).
  std::vector<const Instruction*> SharedLazyInputs(const Instruction* select, int lazy);
  Val EmitLazySelect(const Instruction* select, const Index& index, int lazy);
  // Clamped dynamic start indices of a dynamic-(update-)slice, as uniform i64 values.
  std::vector<llvm::Value*> StartIndices(const Instruction* instr, size_t first,
                                         const std::vector<int64_t>& sizes);
  llvm::Value* ToI64(const Val& v, DType t);
  LaneMath Lanes() { return LaneMath(b_, width_); }
  llvm::Value* Widen(const Val& v) { return Lanes().Widen(v); }

  struct CacheEntry {
    int width;
    Index index;
    Val value;
  };
  Builder& b_;
  BufferReader reader_;
  int width_;
  int reduction_width_;
  bool native_half_ = false;
  std::vector<std::unordered_map<const Instruction*, std::vector<CacheEntry>>> scopes_;
  bool in_concat_branch_ = false;  // inside EmitConcatenate's per-operand branches
  std::unordered_map<const Instruction*, RowValue> row_values_;
  std::unordered_map<const Instruction*, LaneRowRead> lane_rows_;
  std::unordered_map<const Instruction*, int> lazy_selects_;  // LazySelectOperand, by select
  std::map<std::pair<const Instruction*, int>, std::unordered_set<const Instruction*>> guarded_;
  const Instruction* visited_reduce_ = nullptr;
  ReduceVisitor reduce_visitor_;
  const WarpCooperation* warp_ = nullptr;
  std::vector<const Instruction*> cooperative_;
  bool in_lane_loop_ = false;  // inside a cooperative loop: lanes diverge
};

// The row-major linear position of a multi-dimensional index into `dims`.
IndexDim LinearIndex(LaneMath& lanes, const Index& index, const std::vector<int64_t>& dims);

// The multi-dimensional index into `dims` of a row-major linear position (size-1
// dimensions are index 0).
Index MultiIndex(LaneMath& lanes, const IndexDim& linear, const std::vector<int64_t>& dims);

}  // namespace fj::codegen
