// Transcendental functions as straight-line LLVM IR over f32/f64 scalars or vectors, so
// they vectorise with the kernel and run the same on the CPU and (later) the GPU.
//
// Algorithms (errors measured against mpmath/float64 references, see tests/test_math.py):
//   exp     Cody-Waite reduction by ln 2, minimax (f32, Cephes) or degree-13 Taylor (f64)
//           polynomial, two-step scaling by 2^n (denormal results round once). <= 1 ulp.
//   log     fdlibm's log(1+f) = f - f^2/2 + s(f^2/2 + R(s^2)), s = f/(2+f). <= 1 ulp.
//   log1p   the same kernel on x itself near 0, log(1+x) elsewhere. <= 2 ulp.
//   expm1   2^n expm1(r) + (2^n - 1) after the exp reduction (no cancellation). <= 2 ulp.
//   sin/cos/tan  reduction by pi/2 (f32: three f32 parts for |x| <= 128, else in f64;
//           f64: fdlibm's three-part pi/2 for |x| <= 2^20), minimax kernels (Cephes f32,
//           fdlibm f64); lanes beyond those ranges call the C library. sin/cos <= 2 ulp.
//           The rare paths (f32 beyond 128, f64 beyond 2^20) are one cold function per
//           module and vector width (CallOutOfLine), called when a vector has such a lane.
//   tanh    expm1(2|x|) / (expm1(2|x|) + 2) with the sign of x. <= 3 ulp.
//   atan2   octant reduction, t > tan(pi/8) folded by (t-1)/(t+1); Cephes polynomial (f32),
//           argument halving and a Taylor series (f64). <= 4 ulp.
//   pow     f32: exp(y log|x|) in f64 with C99's special cases; f64: the C library.
#include "codegen/math.h"

#include <cmath>
#include <string>
#include <vector>

#include "llvm/IR/Intrinsics.h"

namespace fj::codegen {
namespace {

// Arithmetic on a float type (scalar or vector) with the integer type of the same shape.
class FloatMath {
 public:
  FloatMath(Builder& b, llvm::Type* t) : b_(b), t_(t) {
    llvm::Type* s = t->getScalarType();
    f32_ = s->isFloatTy();
    llvm::Type* is = f32_ ? b.getInt32Ty() : b.getInt64Ty();
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) {
      width_ = vt->getNumElements();
      it_ = llvm::FixedVectorType::get(is, width_);
    } else {
      it_ = is;
    }
  }

  bool f32() const { return f32_; }
  int width() const { return width_; }
  llvm::Type* type() const { return t_; }
  llvm::Type* int_type() const { return it_; }
  int mantissa_bits() const { return f32_ ? 23 : 52; }
  int bias() const { return f32_ ? 127 : 1023; }

  llvm::Value* C(double v) { return llvm::ConstantFP::get(t_, v); }
  llvm::Value* I(int64_t v) { return llvm::ConstantInt::get(it_, static_cast<uint64_t>(v), true); }
  llvm::Value* Add(llvm::Value* a, llvm::Value* c) { return b_.CreateFAdd(a, c); }
  llvm::Value* Sub(llvm::Value* a, llvm::Value* c) { return b_.CreateFSub(a, c); }
  llvm::Value* Mul(llvm::Value* a, llvm::Value* c) { return b_.CreateFMul(a, c); }
  llvm::Value* Div(llvm::Value* a, llvm::Value* c) { return b_.CreateFDiv(a, c); }
  llvm::Value* Neg(llvm::Value* a) { return b_.CreateFNeg(a); }
  llvm::Value* Fma(llvm::Value* a, llvm::Value* m, llvm::Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t_}, {a, m, c});
  }
  llvm::Value* Unary(llvm::Intrinsic::ID id, llvm::Value* x) { return b_.CreateUnaryIntrinsic(id, x); }
  llvm::Value* Abs(llvm::Value* x) { return Unary(llvm::Intrinsic::fabs, x); }
  llvm::Value* RoundEven(llvm::Value* x) { return Unary(llvm::Intrinsic::roundeven, x); }
  llvm::Value* Floor(llvm::Value* x) { return Unary(llvm::Intrinsic::floor, x); }
  llvm::Value* Sqrt(llvm::Value* x) { return Unary(llvm::Intrinsic::sqrt, x); }
  llvm::Value* CopySign(llvm::Value* mag, llvm::Value* sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  llvm::Value* Select(llvm::Value* c, llvm::Value* a, llvm::Value* e) { return b_.CreateSelect(c, a, e); }
  llvm::Value* Gt(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOGT(a, c); }
  llvm::Value* Lt(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOLT(a, c); }
  llvm::Value* Eq(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOEQ(a, c); }
  llvm::Value* IsNan(llvm::Value* a) { return b_.CreateFCmpUNO(a, a); }
  llvm::Value* SignBit(llvm::Value* a) {
    return b_.CreateICmpSLT(b_.CreateBitCast(a, it_), llvm::Constant::getNullValue(it_));
  }
  // Horner with fused multiply-adds; coefficients from the highest degree down.
  llvm::Value* Poly(llvm::Value* x, std::initializer_list<double> coeffs) {
    auto it = coeffs.begin();
    llvm::Value* p = C(*it++);
    for (; it != coeffs.end(); ++it) p = Fma(p, x, C(*it));
    return p;
  }
  // Float-to-int for values already known to be in range, or NaN (-> 0). (The
  // saturating intrinsic would be scalarised on x86.)
  llvm::Value* ToInt(llvm::Value* x) {
    return b_.CreateFPToSI(Select(IsNan(x), C(0.0), x), it_);
  }
  // 2^k for integer k in [-(bias-1), bias], by building the exponent field.
  llvm::Value* Pow2(llvm::Value* k) {
    llvm::Value* bits = b_.CreateShl(b_.CreateAdd(k, I(bias())), I(mantissa_bits()));
    return b_.CreateBitCast(bits, t_);
  }
  // p * 2^n for n up to about twice the exponent range, in two exact steps.
  llvm::Value* Scale(llvm::Value* p, llvm::Value* n) {
    llvm::Value* n1 = b_.CreateAShr(n, I(1));
    llvm::Value* n2 = b_.CreateSub(n, n1);
    return Mul(Mul(p, Pow2(n1)), Pow2(n2));
  }
  // True if the condition holds for every lane.
  llvm::Value* All(llvm::Value* cond) {
    if (width_ == 1) return cond;
    return b_.CreateIntrinsic(llvm::Intrinsic::vector_reduce_and, {cond->getType()}, {cond});
  }

  Builder& b() { return b_; }

 private:
  Builder& b_;
  llvm::Type* t_;
  llvm::Type* it_;
  bool f32_ = true;
  int width_ = 1;
};

llvm::Value* ExpImpl(FloatMath& m, llvm::Value* x) {
  double hi = m.f32() ? 89.0 : 710.0;
  double lo = m.f32() ? -104.0 : -746.0;
  // Clamp with ordered compares, so NaN passes through.
  llvm::Value* xc = m.Select(m.Gt(x, m.C(hi)), m.C(hi), x);
  xc = m.Select(m.Lt(xc, m.C(lo)), m.C(lo), xc);
  llvm::Value* n = m.RoundEven(m.Mul(xc, m.C(1.44269504088896338700)));
  llvm::Value* p;
  if (m.f32()) {
    llvm::Value* r = m.Fma(n, m.C(-0.693359375), xc);
    r = m.Fma(n, m.C(2.12194440e-4), r);
    p = m.Poly(r, {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
                   1.6666665459E-1, 5.0000001201E-1});
    p = m.Add(m.Fma(p, m.Mul(r, r), r), m.C(1.0));
  } else {
    llvm::Value* r = m.Fma(n, m.C(-6.93147180369123816490e-01), xc);
    r = m.Fma(n, m.C(-1.90821492927058770002e-10), r);
    // Taylor series to degree 13: the remainder is below 2^-57 on |r| <= ln2/2.
    p = m.Poly(r, {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                   1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
                   1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0});
  }
  return m.Scale(p, m.ToInt(n));
}

// log(1 + f) + e * ln2 for f in [sqrt(1/2) - 1, sqrt(2) - 1] (fdlibm's kernel).
llvm::Value* LogKernel(FloatMath& m, llvm::Value* f, llvm::Value* e) {
  llvm::Value* s = m.Div(f, m.Add(m.C(2.0), f));
  llvm::Value* z = m.Mul(s, s);
  llvm::Value* w = m.Mul(z, z);
  llvm::Value *t1, *t2;
  if (m.f32()) {
    t1 = m.Mul(w, m.Fma(w, m.C(2.4279078841e-01), m.C(4.0000972152e-01)));
    t2 = m.Mul(z, m.Fma(w, m.C(2.8498786688e-01), m.C(6.6666662693e-01)));
  } else {
    t1 = m.Mul(w, m.Poly(w, {1.531383769920937332e-01, 2.222219843214978396e-01,
                             3.999999999940941908e-01}));
    t2 = m.Mul(z, m.Poly(w, {1.479819860511658591e-01, 1.818357216161805012e-01,
                             2.857142874366239149e-01, 6.666666666666735130e-01}));
  }
  llvm::Value* r = m.Add(t2, t1);
  llvm::Value* hfsq = m.Mul(m.Mul(m.C(0.5), f), f);
  double ln2_hi = m.f32() ? 6.9313812256e-01 : 6.93147180369123816490e-01;
  double ln2_lo = m.f32() ? 9.0580006145e-06 : 1.90821492927058770002e-10;
  llvm::Value* inner = m.Add(m.Mul(s, m.Add(hfsq, r)), m.Mul(e, m.C(ln2_lo)));
  return m.Sub(m.Mul(e, m.C(ln2_hi)), m.Sub(m.Sub(hfsq, inner), f));
}

llvm::Value* LogImpl(FloatMath& m, llvm::Value* x) {
  Builder& b = m.b();
  int mbits = m.mantissa_bits();
  // Denormals: scale into the normal range first.
  double min_normal = m.f32() ? 1.17549435e-38 : 2.2250738585072014e-308;
  int shift = m.f32() ? 25 : 54;
  llvm::Value* sub = m.Lt(x, m.C(min_normal));
  llvm::Value* xs = m.Select(sub, m.Mul(x, m.C(std::ldexp(1.0, shift))), x);
  llvm::Value* e_adj = b.CreateSelect(sub, m.I(-shift), m.I(0));
  llvm::Value* bits = b.CreateBitCast(xs, m.int_type());
  llvm::Value* e = b.CreateAdd(b.CreateSub(b.CreateLShr(bits, m.I(mbits)), m.I(m.bias())), e_adj);
  int64_t mant_mask = (int64_t{1} << mbits) - 1;
  int64_t one_bits = static_cast<int64_t>(m.bias()) << mbits;
  llvm::Value* mant = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, m.I(mant_mask)), m.I(one_bits)), m.type());
  llvm::Value* big = m.Gt(mant, m.C(1.41421356237309504880));
  mant = m.Select(big, m.Mul(mant, m.C(0.5)), mant);
  e = b.CreateAdd(e, b.CreateZExt(big, m.int_type()));
  llvm::Value* f = m.Sub(mant, m.C(1.0));
  llvm::Value* result = LogKernel(m, f, b.CreateSIToFP(e, m.type()));
  result = m.Select(m.Lt(x, m.C(0.0)), m.C(NAN), result);
  result = m.Select(m.Eq(x, m.C(0.0)), m.C(-INFINITY), result);
  result = m.Select(m.Eq(x, m.C(INFINITY)), m.C(INFINITY), result);
  return m.Select(m.IsNan(x), x, result);
}

// expm1(x) = 2^n expm1(r) + (2^n - 1) for x = n ln2 + r, |r| <= ln2/2: no cancellation,
// and for n = 0 the Taylor polynomial itself. Its parts, for x already in [lo, hi] (see
// Expm1Impl); `em1_r` is expm1(r), `n` the integer n.
struct Expm1Parts {
  llvm::Value* em1_r;
  llvm::Value* n;
};

Expm1Parts Expm1Reduce(FloatMath& m, llvm::Value* xc) {
  llvm::Value* n = m.RoundEven(m.Mul(xc, m.C(1.44269504088896338700)));
  llvm::Value* r;
  llvm::Value* p;
  if (m.f32()) {
    r = m.Fma(n, m.C(-0.693359375), xc);
    r = m.Fma(n, m.C(2.12194440e-4), r);
    p = m.Poly(r, {1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5});
  } else {
    r = m.Fma(n, m.C(-6.93147180369123816490e-01), xc);
    r = m.Fma(n, m.C(-1.90821492927058770002e-10), r);
    p = m.Poly(r, {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                   1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
                   1.0 / 24.0, 1.0 / 6.0, 0.5});
  }
  return {m.Fma(m.Mul(r, r), p, r), m.ToInt(n)};
}

llvm::Value* Expm1Impl(FloatMath& m, llvm::Value* x) {
  double hi = m.f32() ? 89.0 : 710.0;
  double lo = m.f32() ? -20.0 : -40.0;  // below: expm1 rounds to -1
  llvm::Value* xc = m.Select(m.Gt(x, m.C(hi)), m.C(hi), x);
  xc = m.Select(m.Lt(xc, m.C(lo)), m.C(lo), xc);
  auto [em1_r, ni] = Expm1Reduce(m, xc);
  Builder& b = m.b();
  // 2^n itself must be finite; near the overflow threshold scale e^r in two steps.
  llvm::Value* max_n = m.I(m.bias() - 1);
  llvm::Value* huge = b.CreateICmpSGT(ni, max_n);
  llvm::Value* s = m.Pow2(b.CreateSelect(huge, max_n, ni));
  llvm::Value* result = m.Fma(s, em1_r, m.Sub(s, m.C(1.0)));
  result = m.Select(huge, m.Scale(m.Add(em1_r, m.C(1.0)), ni), result);
  result = m.Select(m.Lt(x, m.C(lo)), m.C(-1.0), result);
  result = m.Select(m.IsNan(x), x, result);
  return m.Select(m.Eq(x, m.C(0.0)), x, result);  // keeps -0
}

llvm::Value* Log1pImpl(FloatMath& m, llvm::Value* x) {
  // On [sqrt(1/2) - 1, sqrt(2) - 1] the kernel takes x exactly (1 + x would round).
  llvm::Value* near = m.b().CreateAnd(m.Gt(x, m.C(-0.2928932188134524)),
                                      m.Lt(x, m.C(0.41421356237309503)));
  llvm::Value* kernel = LogKernel(m, x, m.C(0.0));
  llvm::Value* far = LogImpl(m, m.Add(x, m.C(1.0)));
  llvm::Value* result = m.Select(near, kernel, far);
  return m.Select(m.Eq(x, m.C(0.0)), x, result);
}

// Calls the C library per lane: the fallback for arguments beyond a reduction's range.
llvm::Value* Libm(Builder& b, const std::string& f32_name, llvm::ArrayRef<llvm::Value*> args) {
  std::string name = f32_name;
  if (!args[0]->getType()->getScalarType()->isFloatTy()) name.pop_back();
  return CallLibmPerLane(b, name.c_str(), args);
}

// Emits `fast(x)` if every lane satisfies `in_range`, else `slow(x)`, with a branch.
template <typename Fast, typename Slow>
llvm::Value* Branch(FloatMath& m, llvm::Value* in_range, Fast fast, Slow slow, const char* name) {
  Builder& b = m.b();
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::BasicBlock* fast_bb = llvm::BasicBlock::Create(ctx, std::string(name) + ".fast", fn);
  llvm::BasicBlock* slow_bb = llvm::BasicBlock::Create(ctx, std::string(name) + ".slow", fn);
  llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx, std::string(name) + ".merge", fn);
  b.CreateCondBr(m.All(in_range), fast_bb, slow_bb);
  b.SetInsertPoint(fast_bb);
  llvm::Value* vf = fast();
  llvm::BasicBlock* fast_end = b.GetInsertBlock();
  b.CreateBr(merge);
  b.SetInsertPoint(slow_bb);
  llvm::Value* vs = slow();
  llvm::BasicBlock* slow_end = b.GetInsertBlock();
  b.CreateBr(merge);
  b.SetInsertPoint(merge);
  llvm::PHINode* phi = b.CreatePHI(vf->getType(), 2);
  phi->addIncoming(vf, fast_end);
  phi->addIncoming(vs, slow_end);
  return phi;
}

// Calls `name`(args), a function of the module returning `args[0]`'s type, emitting its body
// with `body(b, params)` the first time. For the rare paths (large arguments): one cold
// copy per module instead of one inlined into every use and into both the vector and the
// tail loop, which multiplied compile time (LLVM's register allocation and instruction
// selection grow with the function).
template <typename Body>
llvm::Value* CallOutOfLine(Builder& b, const std::string& name, llvm::ArrayRef<llvm::Value*> args, Body body) {
  llvm::Module* mod = b.GetInsertBlock()->getModule();
  llvm::Type* type = args[0]->getType();
  llvm::Type* scalar = type->getScalarType();
  std::string full = name + "." + (scalar->isFloatTy() ? "f32" : scalar->isDoubleTy() ? "f64" : "t");
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(type)) full += "x" + std::to_string(vt->getNumElements());
  llvm::Function* fn = mod->getFunction(full);
  if (!fn) {
    std::vector<llvm::Type*> params;
    for (llvm::Value* a : args) params.push_back(a->getType());
    fn = llvm::Function::Create(llvm::FunctionType::get(type, params, false), llvm::GlobalValue::InternalLinkage,
                                full, mod);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    fn->addFnAttr(llvm::Attribute::NoInline);
    fn->addFnAttr(llvm::Attribute::Cold);
    Builder inner(llvm::BasicBlock::Create(b.getContext(), "entry", fn));
    std::vector<llvm::Value*> values;
    for (llvm::Argument& a : fn->args()) values.push_back(&a);
    inner.CreateRet(body(inner, values));
  }
  return b.CreateCall(fn, args);
}

enum class Trig { kSin, kCos, kTan };

// sin/cos/tan of r in [-pi/4, pi/4] rotated by quadrant q (an integer vector).
llvm::Value* TrigKernel(FloatMath& m, llvm::Value* r, llvm::Value* q, Trig which) {
  Builder& b = m.b();
  llvm::Value* z = m.Mul(r, r);
  llvm::Value *s, *c;
  if (m.f32()) {
    s = m.Fma(m.Mul(r, z), m.Poly(z, {-1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1}), r);
    c = m.Fma(m.Mul(z, z), m.Poly(z, {2.443315711809948E-5, -1.388731625493765E-3, 4.166664568298827E-2}),
              m.Fma(m.C(-0.5), z, m.C(1.0)));
  } else {
    s = m.Fma(m.Mul(r, z),
              m.Poly(z, {1.58969099521155010221e-10, -2.50507602534068634195e-08,
                         2.75573137070700676789e-06, -1.98412698298579493134e-04,
                         8.33333333332248946124e-03, -1.66666666666666324348e-01}),
              r);
    c = m.Fma(m.Mul(z, z),
              m.Poly(z, {-1.13596475577881948265e-11, 2.08757232129817482790e-09,
                         -2.75573143513906633035e-07, 2.48015872894767294178e-05,
                         -1.38888888888741095749e-03, 4.16666666666666019037e-02}),
              m.Fma(m.C(-0.5), z, m.C(1.0)));
  }
  llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(q, m.I(1)), m.I(0));
  if (which == Trig::kTan) {
    return m.Select(odd, m.Neg(m.Div(c, s)), m.Div(s, c));
  }
  if (which == Trig::kCos) q = b.CreateAdd(q, m.I(1));  // cos(x) = sin(x + pi/2)
  odd = b.CreateICmpNE(b.CreateAnd(q, m.I(1)), m.I(0));
  llvm::Value* negate = b.CreateICmpNE(b.CreateAnd(q, m.I(2)), m.I(0));
  llvm::Value* v = m.Select(odd, c, s);
  return m.Select(negate, m.Neg(v), v);
}

// sin/cos/tan of f32 arguments beyond 128 (rare): reduced in f64 up to 2^19, the C
// library beyond.
llvm::Value* TrigWideF32(Builder& b, llvm::Value* x, Trig which, const char* libm) {
  FloatMath m(b, x->getType());
  auto f64_reduction = [&] {
    // Reduce in double, evaluate the f32 kernel: accurate to |x| <= 2^19.
    llvm::Type* dt = m.width() == 1 ? b.getDoubleTy()
                                    : static_cast<llvm::Type*>(llvm::FixedVectorType::get(b.getDoubleTy(), m.width()));
    FloatMath d(b, dt);
    llvm::Value* xd = b.CreateFPExt(x, dt);
    llvm::Value* j = d.RoundEven(d.Mul(xd, d.C(6.36619772367581382433e-01)));
    llvm::Value* r = d.Fma(d.Neg(j), d.C(1.57079632673412561417e+00), xd);
    r = d.Fma(d.Neg(j), d.C(6.07710050650619224932e-11), r);
    llvm::Value* q = b.CreateTrunc(d.ToInt(j), m.int_type());
    return TrigKernel(m, b.CreateFPTrunc(r, m.type()), q, which);
  };
  llvm::Value* medium = b.CreateNot(m.Gt(m.Abs(x), m.C(524288.0)));
  return Branch(m, medium, f64_reduction, [&] { return Libm(b, libm, {x}); }, "trig.medium");
}

llvm::Value* TrigImpl(Builder& b, llvm::Value* x, Trig which) {
  FloatMath m(b, x->getType());
  const char* libm = which == Trig::kSin ? "sinf" : which == Trig::kCos ? "cosf" : "tanf";
  std::string wide_name = "fj." + std::string(libm, 3) + ".wide";
  if (m.f32()) {
    auto f32_path = [&] {
      llvm::Value* j = m.RoundEven(m.Mul(x, m.C(0.636619772367581343)));
      llvm::Value* r = m.Fma(m.Neg(j), m.C(1.57079637050628662109375), x);
      r = m.Fma(m.Neg(j), m.C(-4.371138828673793e-08), r);
      r = m.Fma(m.Neg(j), m.C(-1.7151245100058819e-15), r);
      return TrigKernel(m, r, m.ToInt(j), which);
    };
    // NaN lanes count as in range (every path returns NaN for them).
    llvm::Value* small = b.CreateNot(m.Gt(m.Abs(x), m.C(128.0)));
    return Branch(m, small, f32_path, [&] {
      return CallOutOfLine(b, wide_name, {x}, [&](Builder& ib, llvm::ArrayRef<llvm::Value*> a) {
        return TrigWideF32(ib, a[0], which, libm);
      });
    }, "trig");
  }
  auto f64_path = [&] {
    llvm::Value* j = m.RoundEven(m.Mul(x, m.C(6.36619772367581382433e-01)));
    llvm::Value* r = m.Fma(m.Neg(j), m.C(1.57079632673412561417e+00), x);
    r = m.Fma(m.Neg(j), m.C(6.07710050630396597660e-11), r);
    r = m.Fma(m.Neg(j), m.C(2.02226624871116645580e-21), r);
    return TrigKernel(m, r, m.ToInt(j), which);
  };
  llvm::Value* in_range = b.CreateNot(m.Gt(m.Abs(x), m.C(1048576.0)));
  return Branch(m, in_range, f64_path, [&] {
    return CallOutOfLine(b, wide_name, {x}, [&](Builder& ib, llvm::ArrayRef<llvm::Value*> a) {
      return Libm(ib, libm, {a[0]});
    });
  }, "trig");
}

llvm::Value* Atan2Impl(FloatMath& m, llvm::Value* y, llvm::Value* x) {
  Builder& b = m.b();
  llvm::Value* ax = m.Abs(x);
  llvm::Value* ay = m.Abs(y);
  llvm::Value* swap = m.Gt(ay, ax);
  llvm::Value* num = m.Select(swap, ax, ay);
  llvm::Value* den = m.Select(swap, ay, ax);
  llvm::Value* t = m.Div(num, den);
  // 0/0 and inf/inf: the octant's angle is 0 (both zero) or pi/4 (both infinite).
  llvm::Value* both_zero = b.CreateAnd(m.Eq(ax, m.C(0.0)), m.Eq(ay, m.C(0.0)));
  llvm::Value* both_inf = b.CreateAnd(m.Eq(ax, m.C(INFINITY)), m.Eq(ay, m.C(INFINITY)));
  t = m.Select(both_zero, m.C(0.0), m.Select(both_inf, m.C(1.0), t));
  llvm::Value* reduced = m.Gt(t, m.C(0.41421356237309503));
  t = m.Select(reduced, m.Div(m.Sub(t, m.C(1.0)), m.Add(t, m.C(1.0))), t);
  llvm::Value* a;
  double pio4_hi, pio4_lo;
  if (m.f32()) {
    llvm::Value* z = m.Mul(t, t);
    a = m.Fma(m.Mul(z, t), m.Poly(z, {8.05374449538e-2, -1.38776856032E-1, 1.99777106478E-1,
                                      -3.33329491539E-1}), t);
    pio4_hi = static_cast<float>(M_PI / 4);
    pio4_lo = static_cast<float>(M_PI / 4 - static_cast<float>(M_PI / 4));
  } else {
    // Halve the angle once more, then the alternating Taylor series to degree 21.
    llvm::Value* h = m.Div(t, m.Add(m.C(1.0), m.Sqrt(m.Fma(t, t, m.C(1.0)))));
    llvm::Value* z = m.Mul(h, h);
    llvm::Value* p = m.Poly(z, {1.0 / 21, -1.0 / 19, 1.0 / 17, -1.0 / 15, 1.0 / 13, -1.0 / 11,
                                1.0 / 9, -1.0 / 7, 1.0 / 5, -1.0 / 3, 1.0});
    a = m.Mul(m.C(2.0), m.Mul(h, p));
    pio4_hi = 7.85398163397448278999e-01;
    pio4_lo = 3.06161699786838301793e-17;
  }
  a = m.Select(reduced, m.Add(m.C(pio4_hi), m.Add(a, m.C(pio4_lo))), a);
  a = m.Select(swap, m.Add(m.Sub(m.C(2 * pio4_hi), a), m.C(2 * pio4_lo)), a);
  a = m.Select(m.SignBit(x), m.Add(m.Sub(m.C(4 * pio4_hi), a), m.C(4 * pio4_lo)), a);
  llvm::Value* nan = b.CreateOr(m.IsNan(x), m.IsNan(y));
  return m.Select(nan, m.Add(x, y), m.CopySign(a, y));
}

llvm::Value* PowF32Impl(Builder& b, llvm::Value* x, llvm::Value* y) {
  FloatMath m(b, x->getType());
  llvm::Type* dt = m.width() == 1 ? b.getDoubleTy()
                                  : static_cast<llvm::Type*>(llvm::FixedVectorType::get(b.getDoubleTy(), m.width()));
  FloatMath d(b, dt);
  llvm::Value* ax = b.CreateFPExt(m.Abs(x), dt);
  llvm::Value* yd = b.CreateFPExt(y, dt);
  llvm::Value* r = b.CreateFPTrunc(ExpImpl(d, d.Mul(yd, LogImpl(d, ax))), m.type());
  // x < 0 (or -0): integer y keeps the sign of x for odd y; other y give NaN (finite x).
  llvm::Value* y_int = m.Eq(m.Floor(y), y);
  llvm::Value* half = m.Mul(y, m.C(0.5));
  llvm::Value* y_odd = b.CreateAnd(y_int, b.CreateNot(m.Eq(m.Floor(half), half)));
  llvm::Value* neg = m.SignBit(x);
  r = m.Select(b.CreateAnd(neg, y_odd), m.Neg(r), r);
  llvm::Value* finite_neg = b.CreateAnd(m.Lt(x, m.C(0.0)), b.CreateFCmpONE(x, m.C(-INFINITY)));
  llvm::Value* y_finite = b.CreateFCmpONE(m.Abs(y), m.C(INFINITY));
  r = m.Select(b.CreateAnd(finite_neg, b.CreateAnd(y_finite, b.CreateNot(y_int))), m.C(NAN), r);
  llvm::Value* one = m.C(1.0);
  r = m.Select(b.CreateAnd(m.Eq(m.Abs(x), one), m.Eq(m.Abs(y), m.C(INFINITY))), one, r);
  r = m.Select(m.Eq(y, m.C(0.0)), one, r);
  return m.Select(m.Eq(x, one), one, r);
}

}  // namespace

llvm::Value* CallLibmPerLane(Builder& b, const char* name, llvm::ArrayRef<llvm::Value*> args) {
  llvm::Module* mod = b.GetInsertBlock()->getModule();
  llvm::Type* type = args[0]->getType();
  llvm::Type* scalar = type->getScalarType();
  std::vector<llvm::Type*> params(args.size(), scalar);
  llvm::FunctionCallee fn =
      mod->getOrInsertFunction(name, llvm::FunctionType::get(scalar, params, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->setDoesNotThrow();
    f->setOnlyAccessesInaccessibleMemory();  // errno only
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(type);
  if (!vt) return b.CreateCall(fn, args);
  llvm::Value* out = llvm::UndefValue::get(type);
  for (unsigned l = 0; l < vt->getNumElements(); ++l) {
    std::vector<llvm::Value*> lane_args;
    for (llvm::Value* a : args) lane_args.push_back(b.CreateExtractElement(a, l));
    out = b.CreateInsertElement(out, b.CreateCall(fn, lane_args), l);
  }
  return out;
}

llvm::Value* EmitExp(Builder& b, llvm::Value* x) {
  FloatMath m(b, x->getType());
  return ExpImpl(m, x);
}

llvm::Value* EmitExpm1(Builder& b, llvm::Value* x) {
  FloatMath m(b, x->getType());
  return Expm1Impl(m, x);
}

llvm::Value* EmitLog(Builder& b, llvm::Value* x) {
  FloatMath m(b, x->getType());
  return LogImpl(m, x);
}

llvm::Value* EmitLog1p(Builder& b, llvm::Value* x) {
  FloatMath m(b, x->getType());
  return Log1pImpl(m, x);
}

// sin and tan are odd: f(-0) = -0. The reduction x - j*pi/2 and the polynomial's r + r^3 P
// add a +0 to x = -0, which gives +0, so zeros are passed through as they are.
llvm::Value* OddAtZero(Builder& b, llvm::Value* x, llvm::Value* fx) {
  FloatMath m(b, x->getType());
  return m.Select(m.Eq(x, m.C(0.0)), x, fx);
}

llvm::Value* EmitSin(Builder& b, llvm::Value* x) { return OddAtZero(b, x, TrigImpl(b, x, Trig::kSin)); }
llvm::Value* EmitCos(Builder& b, llvm::Value* x) { return TrigImpl(b, x, Trig::kCos); }
llvm::Value* EmitTan(Builder& b, llvm::Value* x) { return OddAtZero(b, x, TrigImpl(b, x, Trig::kTan)); }

llvm::Value* EmitTanh(Builder& b, llvm::Value* x) {
  // tanh |x| = expm1(2|x|) / (expm1(2|x|) + 2), which rounds to 1 from |x| = 9 (float32) or
  // 22 (float64): 2|x| is clamped there, so expm1 needs none of its range cases (2^n is a
  // normal number, the argument is never below its `lo`), and a NaN stays NaN throughout.
  FloatMath m(b, x->getType());
  double one_from = m.f32() ? 9.0 : 22.0;
  llvm::Value* ax = m.Abs(x);
  llvm::Value* big = m.Gt(ax, m.C(one_from));
  auto [em1_r, n] = Expm1Reduce(m, m.Mul(m.C(2.0), m.Select(big, m.C(one_from), ax)));
  llvm::Value* s = m.Pow2(n);
  llvm::Value* em = m.Fma(s, em1_r, m.Sub(s, m.C(1.0)));
  llvm::Value* t = m.Select(big, m.C(1.0), m.Div(em, m.Add(em, m.C(2.0))));
  return m.CopySign(t, x);
}

llvm::Value* EmitAtan2(Builder& b, llvm::Value* y, llvm::Value* x) {
  FloatMath m(b, x->getType());
  return Atan2Impl(m, y, x);
}

llvm::Value* EmitPow(Builder& b, llvm::Value* x, llvm::Value* y) {
  if (x->getType()->getScalarType()->isFloatTy()) return PowF32Impl(b, x, y);
  return Libm(b, "powf", {x, y});
}

}  // namespace fj::codegen
