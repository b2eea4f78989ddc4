// LLVM helpers shared by the emitters: element types, lane vectors, and the "value over a
// group of lanes" representation the elemental emitter computes with.
//
// A kernel processes `width` consecutive output elements at once (CPU: a SIMD vector;
// GPU: width 1, one thread per element). A Val is either uniform (one scalar for all
// lanes) or varying (a <width x T> vector). An IndexDim is an i64 index per lane, kept
// symbolic as base + lane * stride, or base + a constant offset per lane, where possible
// so that loads become vector loads (stride 1), scalar loads (stride 0), a load of the
// few elements the lanes span and a shuffle (a constant pattern: a group norm's statistics
// repeated over each group's channels), or gathers (anything else).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ir/dtype.h"
#include "ir/literal.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace fj::codegen {

using Builder = llvm::IRBuilder<>;

llvm::Type* RegisterType(llvm::LLVMContext& ctx, DType t);  // pred -> i1
llvm::Type* StorageType(llvm::LLVMContext& ctx, DType t);   // pred -> i8
llvm::Type* WithWidth(llvm::Type* scalar, int width);      // width 1 -> scalar

struct Val {
  llvm::Value* v = nullptr;
  bool varying = false;
};

struct IndexDim {
  llvm::Value* base = nullptr;  // i64, the value of lane 0 (of lane offsets: see pattern)
  int64_t stride = 0;           // lane l holds base + l * stride (when vec and pattern are null)
  llvm::Value* vec = nullptr;   // otherwise explicit <width x i64> lanes
  // Or lane l holds base + (*pattern)[l] (stride 0, vec null): constant offsets that are no
  // progression, from the quotients and remainders of aligned ramps (LaneMath::DivConst).
  std::shared_ptr<const std::vector<int64_t>> pattern;
  // base is a multiple of `align` (when vec is null): a ramp a vector loop starts at
  // multiples of its width, and what index arithmetic keeps of that.
  int64_t align = 1;
  bool uniform() const { return vec == nullptr && stride == 0 && !pattern; }
  bool operator==(const IndexDim& o) const {
    return base == o.base && stride == o.stride && vec == o.vec &&
           (pattern == o.pattern || (pattern && o.pattern && *pattern == *o.pattern));
  }
};

class LaneMath {
 public:
  LaneMath(Builder& b, int width) : b_(b), width_(width) {}
  int width() const { return width_; }
  Builder& builder() { return b_; }

  llvm::Value* I64(int64_t v) { return b_.getInt64(v); }
  IndexDim Constant(int64_t v);
  IndexDim Uniform(llvm::Value* v) { return {v, 0, nullptr}; }
  // Lanes base, base + 1, ...; `align`: base is known to be a multiple of it (a vector
  // loop's position from a multiple of its width), which lets quotients and remainders of
  // the lanes stay constant patterns (DivConst, RemConst).
  IndexDim LaneRamp(llvm::Value* base, int64_t align = 1) {
    return {base, width_ > 1 ? 1 : 0, nullptr, nullptr, std::max<int64_t>(align, 1)};
  }
  // Lane l's offset from base, for an index that is not `vec`.
  std::vector<int64_t> Offsets(const IndexDim& a) const;

  // Index arithmetic that keeps the base + lane * stride form where it can.
  IndexDim Add(const IndexDim& a, const IndexDim& b);
  IndexDim AddConst(const IndexDim& a, int64_t c);
  IndexDim MulConst(const IndexDim& a, int64_t c);
  // a >= 0; `bound` > 0: every lane of a is below it. Lanes computed apart (not base +
  // lane * stride) are divided in 32 bits where the bound allows: x86 has no vector 64-bit
  // multiply-high, and LLVM divided each lane by a scalar multiply (16 extracts, multiplies
  // and inserts per vector: a gather's index arithmetic 14x its estimate). Lanes at
  // constant offsets from an aligned base stay so: a ramp from a multiple of 16 divided by
  // 8 is base / 8 + (0 x 8, 1 x 8), its remainder (0 .. 7, 0 .. 7).
  IndexDim DivConst(const IndexDim& a, int64_t c, int64_t bound = 0);
  IndexDim RemConst(const IndexDim& a, int64_t c, int64_t bound = 0);
  // Clamps every lane into [lo, hi].
  IndexDim Clamp(const IndexDim& a, int64_t lo, int64_t hi);
  llvm::Value* Materialize(const IndexDim& a);  // <width x i64> (or i64 for width 1)

 private:
  // a's lanes divided by c (`rem`: their remainders), in 32 bits where `bound` allows.
  llvm::Value* DivideLanes(const IndexDim& a, int64_t c, int64_t bound, bool rem);
  // base + offsets in the simplest form: uniform, a progression, or a pattern.
  IndexDim WithOffsets(llvm::Value* base, std::vector<int64_t> offsets, int64_t align);

 public:

  // Values.
  llvm::Value* Splat(llvm::Value* scalar);
  llvm::Value* Widen(const Val& v) { return v.varying ? v.v : Splat(v.v); }
  // Brings two values to a common form: both scalar, or both vectors.
  void Unify(Val& a, Val& b);

 private:
  Builder& b_;
  int width_;
};

// Copies `count` elements of type `storage` from `from` to `to`, permuted: to[e] =
// from[source(e)], in vectors of `piece` elements (`piece` divides `count`) put together by
// two-input shuffles, one per further vector an output vector takes lanes from. Short rows
// go into lanes and back this way (a block of 16 rows of 4: 12 shuffles, not 64 scalar
// loads and stores).
void EmitPermutedCopy(Builder& b, llvm::Type* storage, llvm::Value* from, llvm::Align from_align, llvm::Value* to,
                      llvm::Align to_align, int64_t count, int piece, const std::function<int64_t(int64_t)>& source);

// Transposes `v`, n vectors of n lanes (n a power of two), in registers: afterwards v[j]
// holds lane j of every vector as it was (v[j][i] = old v[i][j]), by log2(n) stages of n
// two-input shuffles (16 x 16: 64 shuffles).
void TransposeSquare(Builder& b, std::vector<llvm::Value*>& v);

// Copies a block of `n` rows of `length` (< n) elements of type `storage` between `flat`
// (row-major: row r at r * length) and `staged` (position-major: position j of row r at
// j * n + r, `staged_align`), as an n x n transpose of vectors of n elements (`n` a power of
// two): the rows loaded (`in`) or stored (out) with a mask of their `length` elements, and
// log2(n) stages of n two-input shuffles between them (16 x 16: 64 shuffles, where copying
// rows of 10 to 15 in or out took 160 to 240 scalar loads and stores).
void EmitMaskedBlockTranspose(Builder& b, llvm::Type* storage, llvm::Value* flat, llvm::Value* staged,
                              llvm::Align staged_align, int n, int64_t length, bool in);

// A constant of element type `t` with the value `v`, as scalar or splat vector of `type`.
llvm::Constant* ConstantOf(llvm::Type* type, double v);
// A one-element literal as a constant of `type` (its register type, or a vector of it):
// floats by value, integers and 16-bit floats by their bits.
llvm::Constant* ScalarConstant(llvm::Type* type, const Literal& lit);

}  // namespace fj::codegen
