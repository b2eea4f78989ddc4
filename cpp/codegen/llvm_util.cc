// LLVM helpers (see llvm_util.h).
#include "codegen/llvm_util.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "support/error.h"

namespace fj::codegen {

llvm::Type* RegisterType(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::kPred: return llvm::Type::getInt1Ty(ctx);
    case DType::kS8: case DType::kU8: return llvm::Type::getInt8Ty(ctx);
    // f16 and bf16 are their bits in registers too: kernels only move and convert them.
    case DType::kS16: case DType::kU16: case DType::kF16: case DType::kBF16: return llvm::Type::getInt16Ty(ctx);
    case DType::kS32: case DType::kU32: return llvm::Type::getInt32Ty(ctx);
    case DType::kS64: case DType::kU64: return llvm::Type::getInt64Ty(ctx);
    case DType::kF32: return llvm::Type::getFloatTy(ctx);
    case DType::kF64: return llvm::Type::getDoubleTy(ctx);
  }
  return nullptr;
}

llvm::Type* StorageType(llvm::LLVMContext& ctx, DType t) {
  return t == DType::kPred ? llvm::Type::getInt8Ty(ctx) : RegisterType(ctx, t);
}

llvm::Type* WithWidth(llvm::Type* scalar, int width) {
  return width == 1 ? scalar : llvm::FixedVectorType::get(scalar, width);
}

llvm::Constant* ConstantOf(llvm::Type* type, double v) {
  llvm::Type* scalar = type->getScalarType();
  if (scalar->isFloatingPointTy()) return llvm::ConstantFP::get(type, v);
  return llvm::ConstantInt::get(type, static_cast<uint64_t>(static_cast<int64_t>(v)), true);
}

llvm::Constant* ScalarConstant(llvm::Type* type, const Literal& lit) {
  if (IsFloat(lit.dtype()) && !IsLowPrecisionFloat(lit.dtype())) return llvm::ConstantFP::get(type, lit.GetDouble(0));
  return llvm::ConstantInt::get(type, lit.GetUint64(0));
}

llvm::Value* LaneMath::Splat(llvm::Value* scalar) {
  if (width_ == 1) return scalar;
  return b_.CreateVectorSplat(width_, scalar);
}

void LaneMath::Unify(Val& a, Val& b) {
  if (a.varying == b.varying) return;
  if (!a.varying) a = {Splat(a.v), true};
  if (!b.varying) b = {Splat(b.v), true};
}

namespace {

// The alignment of a base known to be 0: a multiple of every divisor met. Alignments are
// capped there, so that their products do not overflow: past it, the power of two they hold.
constexpr int64_t kAnyAlign = int64_t{1} << 40;

int64_t Capped(__int128 a) {
  if (a <= kAnyAlign) return static_cast<int64_t>(a);
  int twos = 0;
  while (twos < 40 && a % 2 == 0) {
    a /= 2;
    ++twos;
  }
  return int64_t{1} << twos;
}

// The alignment a constant has (its magnitude; 0 is a multiple of anything).
int64_t AlignOf(int64_t c) { return c == 0 ? kAnyAlign : Capped(c < 0 ? -static_cast<__int128>(c) : c); }
// The alignment of a sum. (Indices are below 2^40, so kAnyAlign means a base of 0, and the
// sum has the other's alignment.)
int64_t Gcd(int64_t a, int64_t b) { return a == kAnyAlign ? b : b == kAnyAlign ? a : std::gcd(a, b); }
int64_t FloorDiv(int64_t a, int64_t c) { return a / c - (a % c != 0 && a < 0 ? 1 : 0); }

}  // namespace

IndexDim LaneMath::Constant(int64_t v) { return {I64(v), 0, nullptr, nullptr, AlignOf(v)}; }

std::vector<int64_t> LaneMath::Offsets(const IndexDim& a) const {
  if (a.pattern) return *a.pattern;
  std::vector<int64_t> off(static_cast<size_t>(width_));
  for (int l = 0; l < width_; ++l) off[l] = l * a.stride;
  return off;
}

IndexDim LaneMath::WithOffsets(llvm::Value* base, std::vector<int64_t> offsets, int64_t align) {
  const int64_t first = offsets[0];
  if (first != 0) {
    base = b_.CreateAdd(base, I64(first));
    align = Gcd(align, AlignOf(first));
    for (int64_t& o : offsets) o -= first;
  }
  const int64_t step = offsets.size() > 1 ? offsets[1] : 0;
  bool progression = true;
  for (size_t l = 0; l < offsets.size() && progression; ++l) progression = offsets[l] == static_cast<int64_t>(l) * step;
  if (progression) return {base, step, nullptr, nullptr, align};
  return {base, 0, nullptr, std::make_shared<const std::vector<int64_t>>(std::move(offsets)), align};
}

llvm::Value* LaneMath::Materialize(const IndexDim& a) {
  if (a.vec) return a.vec;
  if (width_ == 1) return a.base;
  llvm::Value* base = Splat(a.base);
  if (a.uniform()) return base;
  std::vector<llvm::Constant*> lanes;
  for (int64_t o : Offsets(a)) lanes.push_back(b_.getInt64(o));
  return b_.CreateAdd(base, llvm::ConstantVector::get(lanes));
}

IndexDim LaneMath::Add(const IndexDim& a, const IndexDim& b) {
  if (!a.vec && !b.vec) {
    const int64_t align = Gcd(a.align, b.align);
    if (!a.pattern && !b.pattern) return {b_.CreateAdd(a.base, b.base), a.stride + b.stride, nullptr, nullptr, align};
    std::vector<int64_t> off = Offsets(a), other = Offsets(b);
    for (size_t l = 0; l < off.size(); ++l) off[l] += other[l];
    return WithOffsets(b_.CreateAdd(a.base, b.base), std::move(off), align);
  }
  llvm::Value* v = b_.CreateAdd(Materialize(a), Materialize(b));
  return {nullptr, 0, v};
}

IndexDim LaneMath::AddConst(const IndexDim& a, int64_t c) {
  if (c == 0) return a;
  if (!a.vec) {
    IndexDim r = a;
    r.base = b_.CreateAdd(a.base, I64(c));
    r.align = Gcd(a.align, AlignOf(c));
    return r;
  }
  return {nullptr, 0, b_.CreateAdd(a.vec, Splat(I64(c)))};
}

IndexDim LaneMath::MulConst(const IndexDim& a, int64_t c) {
  if (c == 1) return a;
  if (!a.vec) {
    const int64_t align = c == 0 ? kAnyAlign : Capped(static_cast<__int128>(a.align) * AlignOf(c));
    if (!a.pattern) return {b_.CreateMul(a.base, I64(c)), a.stride * c, nullptr, nullptr, align};
    std::vector<int64_t> off = *a.pattern;
    for (int64_t& o : off) o *= c;
    return WithOffsets(b_.CreateMul(a.base, I64(c)), std::move(off), align);
  }
  return {nullptr, 0, b_.CreateMul(a.vec, Splat(I64(c)))};
}

llvm::Value* LaneMath::DivideLanes(const IndexDim& a, int64_t c, int64_t bound, bool rem) {
  llvm::Value* v = Materialize(a);
  if (width_ > 1 && bound > 0 && bound <= (int64_t{1} << 31) && c < (int64_t{1} << 31)) {
    llvm::Type* narrow = llvm::FixedVectorType::get(b_.getInt32Ty(), width_);
    llvm::Value* d = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(width_), b_.getInt32(static_cast<uint32_t>(c)));
    llvm::Value* n = b_.CreateTrunc(v, narrow);
    return b_.CreateZExt(rem ? b_.CreateURem(n, d) : b_.CreateUDiv(n, d), v->getType());
  }
  return rem ? b_.CreateURem(v, Splat(I64(c))) : b_.CreateUDiv(v, Splat(I64(c)));
}

IndexDim LaneMath::DivConst(const IndexDim& a, int64_t c, int64_t bound) {
  if (c == 1) return a;
  if (a.vec) return {nullptr, 0, DivideLanes(a, c, bound, false)};
  const int64_t quotient_align = a.align % c == 0 ? a.align / c : 1;
  if (a.uniform()) return {b_.CreateUDiv(a.base, I64(c)), 0, nullptr, nullptr, quotient_align};
  std::vector<int64_t> off = Offsets(a);
  const auto [lo, hi] = std::minmax_element(off.begin(), off.end());
  const bool multiples = std::all_of(off.begin(), off.end(), [c](int64_t o) { return o % c == 0; });
  if (multiples || a.align % c == 0) {
    // (base + o) / c == base / c + o / c where c divides o, or base (floor division).
    for (int64_t& o : off) o = FloorDiv(o, c);
    return WithOffsets(b_.CreateUDiv(a.base, I64(c)), std::move(off), quotient_align);
  }
  // Offsets below the base's alignment (and c's) never carry it past a multiple of c: every
  // lane has the base's quotient.
  if (*lo >= 0 && *hi < Gcd(a.align, c)) return {b_.CreateUDiv(a.base, I64(c)), 0, nullptr};
  return {nullptr, 0, DivideLanes(a, c, bound, false)};
}

IndexDim LaneMath::RemConst(const IndexDim& a, int64_t c, int64_t bound) {
  if (c == 1) return Constant(0);
  if (a.vec) return {nullptr, 0, DivideLanes(a, c, bound, true)};
  if (a.align % c == 0) {
    // base % c == 0: the offsets' remainders, constants.
    std::vector<int64_t> off = Offsets(a);
    for (int64_t& o : off) o -= FloorDiv(o, c) * c;
    return WithOffsets(I64(0), std::move(off), kAnyAlign);
  }
  if (a.uniform()) return {b_.CreateURem(a.base, I64(c)), 0, nullptr};
  std::vector<int64_t> off = Offsets(a);
  const auto [lo, hi] = std::minmax_element(off.begin(), off.end());
  if (std::all_of(off.begin(), off.end(), [c](int64_t o) { return o % c == 0; })) {
    return {b_.CreateURem(a.base, I64(c)), 0, nullptr};
  }
  // As in DivConst: no lane passes a multiple of c, so base % c + its offset.
  const int64_t g = Gcd(a.align, c);
  if (*lo >= 0 && *hi < g) return WithOffsets(b_.CreateURem(a.base, I64(c)), std::move(off), g);
  return {nullptr, 0, DivideLanes(a, c, bound, true)};
}

IndexDim LaneMath::Clamp(const IndexDim& a, int64_t lo, int64_t hi) {
  if (a.uniform()) {
    llvm::Value* v = b_.CreateSelect(b_.CreateICmpSLT(a.base, I64(lo)), I64(lo), a.base);
    v = b_.CreateSelect(b_.CreateICmpSGT(v, I64(hi)), I64(hi), v);
    return {v, 0, nullptr};
  }
  llvm::Value* v = Materialize(a);
  llvm::Value* l = Splat(I64(lo));
  llvm::Value* h = Splat(I64(hi));
  v = b_.CreateSelect(b_.CreateICmpSLT(v, l), l, v);
  v = b_.CreateSelect(b_.CreateICmpSGT(v, h), h, v);
  return {nullptr, 0, v};
}

void EmitPermutedCopy(Builder& b, llvm::Type* storage, llvm::Value* from, llvm::Align from_align, llvm::Value* to,
                      llvm::Align to_align, int64_t count, int piece, const std::function<int64_t(int64_t)>& source) {
  FJ_CHECK(piece > 0 && count % piece == 0, "a permuted copy of ", count, " elements in vectors of ", piece);
  llvm::Type* vector = WithWidth(storage, piece);
  std::vector<llvm::Value*> pieces(static_cast<size_t>(count / piece), nullptr);
  auto load = [&](int64_t p) {
    if (!pieces[p]) {
      pieces[p] = b.CreateAlignedLoad(vector, b.CreateGEP(storage, from, b.getInt64(p * piece)), from_align);
    }
    return pieces[p];
  };
  for (int64_t q = 0; q < count / piece; ++q) {
    // The lanes of output vector q, by the input vector they come from (in order).
    std::map<int64_t, std::vector<std::pair<int, int>>> by_piece;  // input vector -> (lane, its lane there)
    for (int lane = 0; lane < piece; ++lane) {
      int64_t s = source(q * piece + lane);
      by_piece[s / piece].push_back({lane, static_cast<int>(s % piece)});
    }
    llvm::Value* out = nullptr;
    bool arranged = false;  // out's lanes are the output's (else: mask picks them from it)
    std::vector<int> mask(piece, -1);
    for (const auto& [p, lanes] : by_piece) {
      if (out && arranged) {
        for (int lane = 0; lane < piece; ++lane) mask[lane] = mask[lane] < 0 ? -1 : lane;
      }
      for (auto [lane, at] : lanes) mask[lane] = (out ? piece : 0) + at;
      if (!out) {
        out = load(p);
        continue;
      }
      out = b.CreateShuffleVector(out, load(p), mask);
      arranged = true;
    }
    bool identity = true;
    for (int lane = 0; lane < piece; ++lane) identity = identity && mask[lane] == lane;
    if (!arranged && !identity) out = b.CreateShuffleVector(out, mask);
    b.CreateAlignedStore(out, b.CreateGEP(storage, to, b.getInt64(q * piece)), to_align);
  }
}

void TransposeSquare(Builder& b, std::vector<llvm::Value*>& v) {
  const int n = static_cast<int>(v.size());
  FJ_CHECK(n > 1 && (n & (n - 1)) == 0, "a square transpose of ", n, " vectors");
  // Stage `half`: swap the off-diagonal half x half blocks of every 2half x 2half block
  // (vectors i and i + half, lanes with and without the bit `half`). After the stages for
  // n/2 .. 1, v[j] holds element j of every input vector.
  for (int half = n / 2; half >= 1; half /= 2) {
    for (int i = 0; i < n; ++i) {
      if (i & half) continue;
      std::vector<int> low(n), high(n);
      for (int c = 0; c < n; ++c) {
        low[c] = (c & half) ? n + c - half : c;    // v[i]'s lanes, then v[i + half]'s
        high[c] = (c & half) ? n + c : c + half;
      }
      llvm::Value* a = v[i];
      llvm::Value* c = v[i + half];
      v[i] = b.CreateShuffleVector(a, c, low);
      v[i + half] = b.CreateShuffleVector(a, c, high);
    }
  }
}

void EmitMaskedBlockTranspose(Builder& b, llvm::Type* storage, llvm::Value* flat, llvm::Value* staged,
                              llvm::Align staged_align, int n, int64_t length, bool in) {
  FJ_CHECK(n > 1 && (n & (n - 1)) == 0 && length > 0 && length < n, "a masked transpose of ", n, " rows of ",
           length);
  llvm::Type* vector = WithWidth(storage, n);
  llvm::Align flat_align(storage->getPrimitiveSizeInBits() / 8);
  std::vector<llvm::Constant*> lanes;
  for (int l = 0; l < n; ++l) lanes.push_back(b.getInt1(l < length));
  llvm::Constant* mask = llvm::ConstantVector::get(lanes);
  llvm::Value* poison = llvm::PoisonValue::get(vector);
  // v[i]: row i (in) or position i (out), lanes beyond `length` positions undefined.
  std::vector<llvm::Value*> v(static_cast<size_t>(n), poison);
  for (int i = 0; i < n; ++i) {
    if (in) {
      v[i] = b.CreateMaskedLoad(vector, b.CreateGEP(storage, flat, b.getInt64(i * length)), flat_align, mask, poison);
    } else if (i < length) {
      v[i] = b.CreateAlignedLoad(vector, b.CreateGEP(storage, staged, b.getInt64(i * n)), staged_align);
    }
  }
  TransposeSquare(b, v);
  for (int i = 0; i < n; ++i) {
    if (in && i < length) {
      b.CreateAlignedStore(v[i], b.CreateGEP(storage, staged, b.getInt64(i * n)), staged_align);
    } else if (!in) {
      b.CreateMaskedStore(v[i], b.CreateGEP(storage, flat, b.getInt64(i * length)), flat_align, mask);
    }
  }
}

}  // namespace fj::codegen
