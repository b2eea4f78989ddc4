// Reference evaluator (see evaluator.h). Clarity over speed: it folds small constants.
#include "analysis/evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "ir/computation.h"
#include "support/error.h"

namespace fj {
namespace {

template <typename F>
auto DispatchDType(DType t, F&& f) {
  switch (t) {
    case DType::kPred: return f(bool{});
    case DType::kS8: return f(int8_t{});
    case DType::kS16: return f(int16_t{});
    case DType::kU8: return f(uint8_t{});
    case DType::kU16: return f(uint16_t{});
    case DType::kF16: case DType::kBF16:
      // Only conversions and data movement see 16-bit floats here (EvaluateInstruction).
      FJ_CHECK(false, "evaluator: arithmetic on " + std::string(DTypeName(t)));
      break;
    case DType::kS32: return f(int32_t{});
    case DType::kS64: return f(int64_t{});
    case DType::kU32: return f(uint32_t{});
    case DType::kU64: return f(uint64_t{});
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
  }
  return f(double{});
}

template <typename T>
T Get(const Literal& l, int64_t i) {
  return static_cast<const T*>(l.data())[i];
}
template <typename T>
void Set(Literal& l, int64_t i, T v) {
  static_cast<T*>(l.data())[i] = v;
}

// Calls fn(multi_index, linear_index) for every element of `dims` in row-major order.
template <typename F>
void ForEachIndex(const std::vector<int64_t>& dims, F&& fn) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t linear = 0; linear < n; ++linear) {
    fn(idx, linear);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

int64_t Linear(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t l = 0;
  for (size_t i = 0; i < idx.size(); ++i) l += idx[i] * strides[i];
  return l;
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;
template <typename T>
constexpr bool kIsPred = std::is_same_v<T, bool>;

template <typename T>
T IntPow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  U e = static_cast<U>(exp);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T>
std::optional<T> EvalUnary(Opcode op, T x) {
  if constexpr (kIsPred<T>) {
    if (op == Opcode::kNot) return static_cast<T>(!x);
    if (op == Opcode::kCopy) return x;
    return std::nullopt;
  } else if constexpr (kIsFloat<T>) {
    switch (op) {
      case Opcode::kNegate: return -x;
      case Opcode::kAbs: return std::fabs(x);
      case Opcode::kSign: return std::isnan(x) ? x : x > 0 ? T(1) : x < 0 ? T(-1) : x;
      case Opcode::kFloor: return std::floor(x);
      case Opcode::kCeil: return std::ceil(x);
      case Opcode::kRoundNearestEven: return std::nearbyint(x);
      case Opcode::kRoundNearestAfz: return std::round(x);
      case Opcode::kExp: return std::exp(x);
      case Opcode::kExpm1: return std::expm1(x);
      case Opcode::kLog: return std::log(x);
      case Opcode::kLog1p: return std::log1p(x);
      case Opcode::kSqrt: return std::sqrt(x);
      case Opcode::kRsqrt: return T(1) / std::sqrt(x);
      case Opcode::kSin: return std::sin(x);
      case Opcode::kCos: return std::cos(x);
      case Opcode::kTan: return std::tan(x);
      case Opcode::kTanh: return std::tanh(x);
      case Opcode::kCopy: return x;
      default: return std::nullopt;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case Opcode::kNegate: return static_cast<T>(U(0) - static_cast<U>(x));
      case Opcode::kAbs:
        if constexpr (std::is_signed_v<T>) return x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x;
        return x;
      case Opcode::kSign:
        if constexpr (std::is_signed_v<T>) return static_cast<T>((x > 0) - (x < 0));
        return static_cast<T>(x > 0);
      case Opcode::kNot: return static_cast<T>(~x);
      case Opcode::kPopulationCount: return static_cast<T>(__builtin_popcountll(static_cast<U>(x)));
      case Opcode::kCopy: return x;
      default: return std::nullopt;
    }
  }
}

template <typename T>
std::optional<T> EvalBinary(Opcode op, T a, T b) {
  if constexpr (kIsPred<T>) {
    switch (op) {
      case Opcode::kAnd: case Opcode::kMinimum: return static_cast<T>(a && b);
      case Opcode::kOr: case Opcode::kMaximum: return static_cast<T>(a || b);
      case Opcode::kXor: return static_cast<T>((a != 0) != (b != 0));
      default: return std::nullopt;
    }
  } else if constexpr (kIsFloat<T>) {
    switch (op) {
      case Opcode::kAdd: return a + b;
      case Opcode::kSubtract: return a - b;
      case Opcode::kMultiply: return a * b;
      case Opcode::kDivide: return a / b;
      case Opcode::kRemainder: return std::fmod(a, b);
      case Opcode::kPower: return std::pow(a, b);
      case Opcode::kAtan2: return std::atan2(a, b);
      case Opcode::kMaximum: return (std::isnan(a) || std::isnan(b)) ? a + b : (a > b || (a == b && !std::signbit(a))) ? a : b;
      case Opcode::kMinimum: return (std::isnan(a) || std::isnan(b)) ? a + b : (a < b || (a == b && std::signbit(a))) ? a : b;
      default: return std::nullopt;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    constexpr int kBits = 8 * sizeof(T);
    switch (op) {
      case Opcode::kAdd: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case Opcode::kSubtract: return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
      case Opcode::kMultiply: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case Opcode::kDivide:
        if (b == 0) return static_cast<T>(-1);
        if constexpr (std::is_signed_v<T>) {
          if (a == std::numeric_limits<T>::min() && b == -1) return a;
        }
        return a / b;
      case Opcode::kRemainder:
        if (b == 0) return a;
        if constexpr (std::is_signed_v<T>) {
          if (a == std::numeric_limits<T>::min() && b == -1) return 0;
        }
        return a % b;
      case Opcode::kPower: return IntPow(a, b);
      case Opcode::kMaximum: return a > b ? a : b;
      case Opcode::kMinimum: return a < b ? a : b;
      case Opcode::kAnd: return a & b;
      case Opcode::kOr: return a | b;
      case Opcode::kXor: return a ^ b;
      case Opcode::kShiftLeft:
        return static_cast<U>(b) >= kBits ? T(0) : static_cast<T>(static_cast<U>(a) << static_cast<U>(b));
      case Opcode::kShiftRightLogical:
        return static_cast<U>(b) >= kBits ? T(0) : static_cast<T>(static_cast<U>(a) >> static_cast<U>(b));
      case Opcode::kShiftRightArithmetic: {
        using S = std::make_signed_t<T>;
        S sa = static_cast<S>(a);
        if (static_cast<U>(b) >= kBits) return static_cast<T>(sa < 0 ? S(-1) : S(0));
        return static_cast<T>(sa >> static_cast<U>(b));
      }
      default: return std::nullopt;
    }
  }
}

template <typename T>
bool EvalCompare(ComparisonDirection d, T a, T b) {
  switch (d) {
    case ComparisonDirection::kEq: return a == b;
    case ComparisonDirection::kNe: return a != b;
    case ComparisonDirection::kLt: return a < b;
    case ComparisonDirection::kLe: return a <= b;
    case ComparisonDirection::kGt: return a > b;
    case ComparisonDirection::kGe: return a >= b;
  }
  return false;
}

template <typename To, typename From>
To ConvertValue(From x) {
  if constexpr (kIsPred<To>) {
    return static_cast<To>(x != From(0));
  } else if constexpr (kIsFloat<From> && !kIsFloat<To>) {
    // Saturating, NaN -> 0 (codegen uses llvm.fpto[su]i.sat, which does the same).
    if (std::isnan(x)) return 0;
    if (x <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

Literal ConvertLiteral(const Literal& x, DType to);

// To or from f16/bf16, as codegen does it: through f32.
Literal ConvertLowPrecision(const Literal& x, DType to) {
  if (IsLowPrecisionFloat(to)) {
    Literal wide = IsFloat(x.dtype()) ? x : ConvertLiteral(x, DType::kF32);
    Literal out(x.shape().WithDType(to));
    for (int64_t i = 0; i < x.num_elements(); ++i) out.SetDouble(i, wide.GetDouble(i));
    return out;
  }
  Literal f32(x.shape().WithDType(DType::kF32));
  for (int64_t i = 0; i < x.num_elements(); ++i) f32.SetDouble(i, x.GetDouble(i));
  return ConvertLiteral(f32, to);
}

Literal ConvertLiteral(const Literal& x, DType to) {
  if (IsLowPrecisionFloat(x.dtype()) || IsLowPrecisionFloat(to)) return ConvertLowPrecision(x, to);
  Literal out(x.shape().WithDType(to));
  DispatchDType(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    DispatchDType(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      for (int64_t i = 0; i < x.num_elements(); ++i) Set<To>(out, i, ConvertValue<To>(Get<From>(x, i)));
      return 0;
    });
    return 0;
  });
  return out;
}

// Copies elements by an index map: out[i] = x[src(i)], or `fill` where src returns -1.
template <typename SrcFn>
Literal Gather(const Literal& x, const Shape& out_shape, SrcFn&& src, const Literal* fill = nullptr) {
  Literal out(out_shape);
  int bytes = DTypeBytes(x.dtype());
  const char* in = static_cast<const char*>(x.data());
  char* o = static_cast<char*>(out.data());
  ForEachIndex(out_shape.dims(), [&](const std::vector<int64_t>& idx, int64_t linear) {
    int64_t s = src(idx);
    if (s < 0) {
      std::memcpy(o + linear * bytes, fill->data(), bytes);
    } else {
      std::memcpy(o + linear * bytes, in + s * bytes, bytes);
    }
  });
  return out;
}

std::optional<Literal> EvalReduce(const Instruction& instr, const Literal& x, const Literal& init) {
  const std::vector<int64_t>& rdims = instr.dimensions();
  const Shape& out_shape = instr.shape();
  std::vector<int64_t> in_strides = RowMajorStrides(x.shape().dims());
  std::vector<int64_t> kept, reduced_sizes;
  for (int d = 0; d < x.shape().rank(); ++d) {
    bool r = std::count(rdims.begin(), rdims.end(), d);
    if (r) {
      reduced_sizes.push_back(x.shape().dim(d));
    } else {
      kept.push_back(d);
    }
  }
  const Computation& combiner = *instr.to_apply();
  Literal out(out_shape);
  bool failed = false;
  ForEachIndex(out_shape.dims(), [&](const std::vector<int64_t>& oidx, int64_t olinear) {
    if (failed) return;
    Literal acc(Shape::Scalar(x.dtype()));
    std::memcpy(acc.data(), init.data(), DTypeBytes(x.dtype()));
    int64_t base = 0;
    for (size_t k = 0; k < kept.size(); ++k) base += oidx[k] * in_strides[kept[k]];
    ForEachIndex(reduced_sizes, [&](const std::vector<int64_t>& ridx, int64_t) {
      if (failed) return;
      int64_t off = base;
      for (size_t k = 0; k < rdims.size(); ++k) off += ridx[k] * in_strides[rdims[k]];
      Literal elem(Shape::Scalar(x.dtype()));
      std::memcpy(elem.data(), static_cast<const char*>(x.data()) + off * DTypeBytes(x.dtype()),
                  DTypeBytes(x.dtype()));
      std::optional<Literal> r = EvaluateComputation(combiner, {&acc, &elem});
      if (!r) {
        failed = true;
        return;
      }
      acc = *r;
    });
    std::memcpy(static_cast<char*>(out.data()) + olinear * DTypeBytes(x.dtype()), acc.data(),
                DTypeBytes(x.dtype()));
  });
  if (failed) return std::nullopt;
  return out;
}

std::optional<Literal> EvalArgReduce(const Instruction& instr, const Literal& x) {
  int64_t axis = instr.dimensions()[0];
  bool is_max = instr.opcode() == Opcode::kArgMax;
  std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
  Literal out(instr.shape());
  ForEachIndex(instr.shape().dims(), [&](const std::vector<int64_t>& oidx, int64_t olinear) {
    std::vector<int64_t> idx(oidx);
    idx.insert(idx.begin() + axis, 0);
    int64_t best = 0;
    double best_v = 0;
    for (int64_t k = 0; k < x.shape().dim(axis); ++k) {
      idx[axis] = k;
      double v = x.GetDouble(Linear(idx, strides));
      if (IsInteger(x.dtype())) v = static_cast<double>(x.GetInt64(Linear(idx, strides)));
      if (k == 0) {
        best_v = v;
        continue;
      }
      if (std::isnan(best_v)) break;
      if (std::isnan(v) || (is_max ? v > best_v : v < best_v)) {
        best = k;
        best_v = v;
      }
    }
    out.SetInt64(olinear, best);
  });
  return out;
}

}  // namespace

std::optional<Literal> EvaluateInstruction(const Instruction& instr,
                                           const std::vector<const Literal*>& ops) {
  const Shape& shape = instr.shape();
  Opcode op = instr.opcode();
  if (!shape.IsArray()) return std::nullopt;
  if (!MovesBitsOnly(op)) {
    // Arithmetic on f16/bf16 is rewritten to f32 before folding (passes/low_precision.h).
    bool low = IsLowPrecisionFloat(shape.dtype());
    for (const Literal* o : ops) low = low || IsLowPrecisionFloat(o->dtype());
    if (low) return std::nullopt;
  }
  switch (op) {
    case Opcode::kConstant:
      return instr.literal();
    case Opcode::kIota: {
      Literal out(shape);
      int64_t d = instr.dimensions()[0];
      ForEachIndex(shape.dims(), [&](const std::vector<int64_t>& idx, int64_t linear) {
        out.SetInt64(linear, idx[d]);
      });
      return out;
    }
    case Opcode::kConvert:
      return ConvertLiteral(*ops[0], shape.dtype());
    case Opcode::kBitcastConvert: {
      Literal out(shape);
      std::memcpy(out.data(), ops[0]->data(), shape.ByteSize());
      return out;
    }
    case Opcode::kIsFinite: {
      Literal out(shape);
      for (int64_t i = 0; i < out.num_elements(); ++i) out.SetUint64(i, std::isfinite(ops[0]->GetDouble(i)));
      return out;
    }
    case Opcode::kCompare: {
      Literal out(shape);
      DispatchDType(ops[0]->dtype(), [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < out.num_elements(); ++i) {
          out.SetUint64(i, EvalCompare<T>(instr.direction(), Get<T>(*ops[0], i), Get<T>(*ops[1], i)));
        }
        return 0;
      });
      return out;
    }
    case Opcode::kSelect: {
      Literal out(shape);
      int bytes = DTypeBytes(shape.dtype());
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        const Literal* src = ops[0]->GetBool(i) ? ops[1] : ops[2];
        std::memcpy(static_cast<char*>(out.data()) + i * bytes,
                    static_cast<const char*>(src->data()) + i * bytes, bytes);
      }
      return out;
    }
    case Opcode::kFma: {
      Literal out(shape);
      if (shape.dtype() == DType::kF32) {
        for (int64_t i = 0; i < out.num_elements(); ++i) {
          Set<float>(out, i, std::fma(Get<float>(*ops[0], i), Get<float>(*ops[1], i), Get<float>(*ops[2], i)));
        }
      } else if (shape.dtype() == DType::kF64) {
        for (int64_t i = 0; i < out.num_elements(); ++i) {
          Set<double>(out, i, std::fma(Get<double>(*ops[0], i), Get<double>(*ops[1], i), Get<double>(*ops[2], i)));
        }
      } else {
        return std::nullopt;  // half precision: left to the compiled kernel
      }
      return out;
    }
    case Opcode::kClamp: {
      Literal out(shape);
      std::optional<bool> ok = DispatchDType(shape.dtype(), [&](auto tag) -> std::optional<bool> {
        using T = decltype(tag);
        for (int64_t i = 0; i < out.num_elements(); ++i) {
          T lo = Get<T>(*ops[0], ops[0]->num_elements() == 1 ? 0 : i);
          T hi = Get<T>(*ops[2], ops[2]->num_elements() == 1 ? 0 : i);
          std::optional<T> v = EvalBinary<T>(Opcode::kMaximum, Get<T>(*ops[1], i), lo);
          if (!v) return std::nullopt;
          v = EvalBinary<T>(Opcode::kMinimum, *v, hi);
          Set<T>(out, i, *v);
        }
        return true;
      });
      if (!ok) return std::nullopt;
      return out;
    }
    case Opcode::kBroadcast: {
      const Literal& x = *ops[0];
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      const std::vector<int64_t>& bd = instr.dimensions();
      return Gather(x, shape, [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t k = 0; k < bd.size(); ++k) s += (x.shape().dim(k) == 1 ? 0 : idx[bd[k]]) * strides[k];
        return s;
      });
    }
    case Opcode::kReshape:
    case Opcode::kCopy: {
      if (op == Opcode::kCopy) break;
      Literal out(shape);
      std::memcpy(out.data(), ops[0]->data(), shape.ByteSize());
      return out;
    }
    case Opcode::kTranspose: {
      const Literal& x = *ops[0];
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      const std::vector<int64_t>& perm = instr.dimensions();
      return Gather(x, shape, [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t k = 0; k < perm.size(); ++k) s += idx[k] * strides[perm[k]];
        return s;
      });
    }
    case Opcode::kReverse: {
      const Literal& x = *ops[0];
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      const std::vector<int64_t>& rd = instr.dimensions();
      return Gather(x, shape, [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t k = 0; k < idx.size(); ++k) {
          bool rev = std::count(rd.begin(), rd.end(), static_cast<int64_t>(k));
          s += (rev ? shape.dim(k) - 1 - idx[k] : idx[k]) * strides[k];
        }
        return s;
      });
    }
    case Opcode::kSlice: {
      const Literal& x = *ops[0];
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      const SliceConfig& sc = instr.attrs().slice;
      return Gather(x, shape, [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t k = 0; k < idx.size(); ++k) s += (sc.starts[k] + idx[k] * sc.strides[k]) * strides[k];
        return s;
      });
    }
    case Opcode::kScatter: {
      Literal out = *ops[0];
      const Literal& indices = *ops[1];
      const Literal& updates = *ops[2];
      const ScatterDims& s = instr.attrs().scatter;
      auto contains = [](const std::vector<int64_t>& v, int64_t d) { return std::count(v.begin(), v.end(), d) > 0; };
      const std::vector<int64_t>& odims = shape.dims();
      std::vector<int64_t> window(odims.size(), 1);
      size_t w = 0;
      for (size_t d = 0; d < odims.size(); ++d) {
        if (!contains(s.inserted_window_dims, static_cast<int64_t>(d))) window[d] = updates.shape().dim(static_cast<int>(s.update_window_dims[w++]));
      }
      std::vector<int64_t> os = RowMajorStrides(odims), is = RowMajorStrides(indices.shape().dims());
      bool implicit = s.index_vector_dim == indices.shape().rank();
      int bytes = DTypeBytes(shape.dtype());
      bool failed = false;
      ForEachIndex(updates.shape().dims(), [&](const std::vector<int64_t>& u, int64_t ulinear) {
        if (failed) return;
        std::vector<int64_t> at, offsets, pos(odims.size(), 0);
        for (size_t d = 0; d < u.size(); ++d) (contains(s.update_window_dims, static_cast<int64_t>(d)) ? offsets : at).push_back(u[d]);
        if (!implicit) at.insert(at.begin() + s.index_vector_dim, 0);
        for (size_t k = 0; k < s.scatter_dims_to_operand_dims.size(); ++k) {
          if (!implicit) at[s.index_vector_dim] = static_cast<int64_t>(k);
          int64_t d = s.scatter_dims_to_operand_dims[k];
          int64_t start = indices.GetInt64(Linear(at, is));
          if (start < 0 || start > odims[d] - window[d]) return;  // the window does not fit: skipped
          pos[d] = start;
        }
        size_t next = 0;
        for (size_t d = 0; d < odims.size(); ++d) {
          if (!contains(s.inserted_window_dims, static_cast<int64_t>(d))) pos[d] += offsets[next++];
        }
        int64_t o = Linear(pos, os);
        Literal a(Shape::Scalar(shape.dtype())), v(Shape::Scalar(shape.dtype()));
        std::memcpy(a.data(), static_cast<const char*>(out.data()) + o * bytes, bytes);
        std::memcpy(v.data(), static_cast<const char*>(updates.data()) + ulinear * bytes, bytes);
        std::optional<Literal> r = EvaluateComputation(*instr.to_apply(), {&a, &v});
        if (!r) {
          failed = true;
          return;
        }
        std::memcpy(static_cast<char*>(out.data()) + o * bytes, r->data(), bytes);
      });
      if (failed) return std::nullopt;
      return out;
    }
    case Opcode::kGather: {
      const Literal& x = *ops[0];
      const Literal& indices = *ops[1];
      const GatherDims& g = instr.attrs().gather;
      const std::vector<int64_t>& sizes = instr.dimensions();
      std::vector<int64_t> xs = RowMajorStrides(x.shape().dims());
      std::vector<int64_t> is = RowMajorStrides(indices.shape().dims());
      auto contains = [](const std::vector<int64_t>& v, int64_t d) { return std::count(v.begin(), v.end(), d) > 0; };
      bool implicit = g.index_vector_dim == indices.shape().rank();
      return Gather(x, shape, [&](const std::vector<int64_t>& o) {
        std::vector<int64_t> at, offset, xi(x.shape().rank(), 0);
        for (int d = 0; d < shape.rank(); ++d) (contains(g.offset_dims, d) ? offset : at).push_back(o[d]);
        if (!implicit) at.insert(at.begin() + g.index_vector_dim, 0);
        for (size_t k = 0; k < g.start_index_map.size(); ++k) {
          if (!implicit) at[g.index_vector_dim] = static_cast<int64_t>(k);
          int64_t d = g.start_index_map[k];
          xi[d] = std::clamp<int64_t>(indices.GetInt64(Linear(at, is)), 0, x.shape().dim(d) - sizes[d]);
        }
        size_t next = 0;
        for (int d = 0; d < x.shape().rank(); ++d) {
          if (!contains(g.collapsed_slice_dims, d)) xi[d] += offset[next++];
        }
        return Linear(xi, xs);
      });
    }
    case Opcode::kDynamicSlice: {
      const Literal& x = *ops[0];
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      std::vector<int64_t> starts;
      for (int k = 0; k < x.shape().rank(); ++k) {
        int64_t s = ops[1 + k]->GetInt64(0);
        starts.push_back(std::min(std::max<int64_t>(s, 0), x.shape().dim(k) - shape.dim(k)));
      }
      return Gather(x, shape, [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t k = 0; k < idx.size(); ++k) s += (starts[k] + idx[k]) * strides[k];
        return s;
      });
    }
    case Opcode::kDynamicUpdateSlice: {
      const Literal& x = *ops[0];
      const Literal& u = *ops[1];
      Literal out = x;
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      std::vector<int64_t> starts;
      for (int k = 0; k < x.shape().rank(); ++k) {
        int64_t s = ops[2 + k]->GetInt64(0);
        starts.push_back(std::min(std::max<int64_t>(s, 0), x.shape().dim(k) - u.shape().dim(k)));
      }
      int bytes = DTypeBytes(x.dtype());
      ForEachIndex(u.shape().dims(), [&](const std::vector<int64_t>& idx, int64_t linear) {
        int64_t dst = 0;
        for (size_t k = 0; k < idx.size(); ++k) dst += (starts[k] + idx[k]) * strides[k];
        std::memcpy(static_cast<char*>(out.data()) + dst * bytes,
                    static_cast<const char*>(u.data()) + linear * bytes, bytes);
      });
      return out;
    }
    case Opcode::kConcatenate: {
      int64_t d = instr.dimensions()[0];
      Literal out(shape);
      std::vector<int64_t> ostrides = RowMajorStrides(shape.dims());
      int bytes = DTypeBytes(shape.dtype());
      int64_t offset = 0;
      for (const Literal* x : ops) {
        ForEachIndex(x->shape().dims(), [&](const std::vector<int64_t>& idx, int64_t linear) {
          std::vector<int64_t> o = idx;
          o[d] += offset;
          std::memcpy(static_cast<char*>(out.data()) + Linear(o, ostrides) * bytes,
                      static_cast<const char*>(x->data()) + linear * bytes, bytes);
        });
        offset += x->shape().dim(d);
      }
      return out;
    }
    case Opcode::kPad: {
      const Literal& x = *ops[0];
      std::vector<int64_t> strides = RowMajorStrides(x.shape().dims());
      const std::vector<PadDim>& pad = instr.attrs().padding;
      return Gather(
          x, shape,
          [&](const std::vector<int64_t>& idx) -> int64_t {
            int64_t s = 0;
            for (size_t k = 0; k < idx.size(); ++k) {
              int64_t rel = idx[k] - pad[k].low;
              if (rel < 0 || rel % (pad[k].interior + 1) != 0) return -1;
              rel /= pad[k].interior + 1;
              if (rel >= x.shape().dim(k)) return -1;
              s += rel * strides[k];
            }
            return s;
          },
          ops[1]);
    }
    case Opcode::kReduce:
      return EvalReduce(instr, *ops[0], *ops[1]);
    case Opcode::kArgMax:
    case Opcode::kArgMin:
      return EvalArgReduce(instr, *ops[0]);
    case Opcode::kDot: {
      const Literal& l = *ops[0];
      const Literal& r = *ops[1];
      const DotDims& dd = instr.attrs().dot;
      std::vector<int64_t> ls = RowMajorStrides(l.shape().dims()), rs = RowMajorStrides(r.shape().dims());
      auto free_dims = [](int rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
        std::vector<int64_t> f;
        for (int i = 0; i < rank; ++i) {
          if (!std::count(a.begin(), a.end(), i) && !std::count(b.begin(), b.end(), i)) f.push_back(i);
        }
        return f;
      };
      std::vector<int64_t> lfree = free_dims(l.shape().rank(), dd.lhs_batch, dd.lhs_contracting);
      std::vector<int64_t> rfree = free_dims(r.shape().rank(), dd.rhs_batch, dd.rhs_contracting);
      std::vector<int64_t> csizes;
      for (int64_t c : dd.lhs_contracting) csizes.push_back(l.shape().dim(c));
      Literal out(shape);
      DispatchDType(shape.dtype(), [&](auto tag) {
        using T = decltype(tag);
        ForEachIndex(shape.dims(), [&](const std::vector<int64_t>& oidx, int64_t olinear) {
          int64_t lbase = 0, rbase = 0;
          size_t p = 0;
          for (size_t k = 0; k < dd.lhs_batch.size(); ++k, ++p) {
            lbase += oidx[p] * ls[dd.lhs_batch[k]];
            rbase += oidx[p] * rs[dd.rhs_batch[k]];
          }
          for (int64_t f : lfree) lbase += oidx[p++] * ls[f];
          for (int64_t f : rfree) rbase += oidx[p++] * rs[f];
          T acc = 0;
          ForEachIndex(csizes, [&](const std::vector<int64_t>& cidx, int64_t) {
            int64_t lo = lbase, ro = rbase;
            for (size_t k = 0; k < cidx.size(); ++k) {
              lo += cidx[k] * ls[dd.lhs_contracting[k]];
              ro += cidx[k] * rs[dd.rhs_contracting[k]];
            }
            if constexpr (kIsPred<T>) {
              acc = acc || (Get<T>(l, lo) && Get<T>(r, ro));
            } else {
              acc = static_cast<T>(acc + Get<T>(l, lo) * Get<T>(r, ro));
            }
          });
          Set<T>(out, olinear, acc);
        });
        return 0;
      });
      return out;
    }
    default:
      break;
  }
  if (!IsElementwise(op)) return std::nullopt;
  Literal out(shape);
  DType t = ops[0]->dtype();
  std::optional<bool> ok = DispatchDType(t, [&](auto tag) -> std::optional<bool> {
    using T = decltype(tag);
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      std::optional<T> v = ops.size() == 1 ? EvalUnary<T>(op, Get<T>(*ops[0], i))
                                           : EvalBinary<T>(op, Get<T>(*ops[0], i), Get<T>(*ops[1], i));
      if (!v) return std::nullopt;
      Set<T>(out, i, *v);
    }
    return true;
  });
  if (!ok) return std::nullopt;
  return out;
}

std::optional<Literal> EvaluateComputation(const Computation& c,
                                           const std::vector<const Literal*>& args) {
  std::unordered_map<const Instruction*, Literal> values;
  for (Instruction* instr : c.MakePostOrder()) {
    if (instr->opcode() == Opcode::kParameter) {
      values.emplace(instr, *args.at(instr->parameter_number()));
      continue;
    }
    std::vector<const Literal*> ops;
    for (Instruction* op : instr->operands()) {
      auto it = values.find(op);
      if (it == values.end()) return std::nullopt;
      ops.push_back(&it->second);
    }
    std::optional<Literal> v = EvaluateInstruction(*instr, ops);
    if (!v) return std::nullopt;
    values.emplace(instr, std::move(*v));
  }
  auto it = values.find(c.root());
  if (it == values.end()) return std::nullopt;
  return it->second;
}

}  // namespace fj
