// Dot layout (see dot_layout.h).
#include "passes/dot_layout.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "ir/builder.h"

namespace fj {
namespace {

std::vector<int64_t> FreeDims(int rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contracting) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) == contracting.end()) {
      free.push_back(d);
    }
  }
  return free;
}

// Multiply-adds below which a product's columns are not padded to whole vectors.
constexpr int64_t kMinPaddedWork = int64_t{1} << 15;

int64_t Product(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= s.dim(d);
  return n;
}

bool IsIdentity(const std::vector<int64_t>& order) {
  for (size_t d = 0; d < order.size(); ++d) {
    if (order[d] != static_cast<int64_t>(d)) return false;
  }
  return true;
}

// Rewrites one dot; false where it is canonical already and a tiled product.
class DotRewriter {
 public:
  DotRewriter(Module& module, Computation* c, Instruction* dot, int lanes)
      : module_(module), b_(c), dot_(dot), dd_(dot->attrs().dot), lanes_(lanes) {}

  bool Run(std::map<DType, Computation*>& combiners) {
    const Shape& l = dot_->operand(0)->shape();
    const Shape& r = dot_->operand(1)->shape();
    batch_ = static_cast<int>(dd_.lhs_batch.size());
    lfree_ = FreeDims(l.rank(), dd_.lhs_batch, dd_.lhs_contracting);
    rfree_ = FreeDims(r.rank(), dd_.rhs_batch, dd_.rhs_contracting);
    m_ = Product(l, lfree_);
    n_ = Product(r, rfree_);
    k_ = Product(l, dd_.lhs_contracting);
    for (int64_t d : dd_.lhs_batch) batch_dims_.push_back(l.dim(d));
    bool small = k_ == 1 || n_ == 1 || m_ == 1;
    if (!small && IsCanonical(l, r) && PaddedN() == n_) return false;

    // lhs as [batch..., M, K], rhs as [batch..., K, N]: contracting dimensions in the order
    // they pair up, so that the flattened K walks both alike.
    std::vector<int64_t> lorder = dd_.lhs_batch, rorder = dd_.rhs_batch;
    lorder.insert(lorder.end(), lfree_.begin(), lfree_.end());
    lorder.insert(lorder.end(), dd_.lhs_contracting.begin(), dd_.lhs_contracting.end());
    rorder.insert(rorder.end(), dd_.rhs_contracting.begin(), dd_.rhs_contracting.end());
    rorder.insert(rorder.end(), rfree_.begin(), rfree_.end());
    // Which form (dot_layout.h); operands of one row or column become vectors.
    const bool outer = k_ == 1, row = !outer && n_ == 1, column = !outer && !row && m_ == 1;
    using Dims = std::vector<int64_t>;
    Instruction* lhs = Canonical(dot_->operand(0), lorder, outer ? Dims{m_} : column ? Dims{k_} : Dims{m_, k_});
    Instruction* rhs = Canonical(dot_->operand(1), rorder, outer ? Dims{n_} : row ? Dims{k_} : Dims{k_, n_});

    Instruction* out;
    DType t = dot_->dtype();
    Opcode mul = IsPred(t) ? Opcode::kAnd : Opcode::kMultiply;
    const int b = batch_;
    if (outer) {
      // An outer product: no sums, an elementwise product that fuses with its neighbours.
      std::vector<int64_t> dims = With({m_, n_});
      Instruction* lb = Tag(b_.Broadcast(lhs, dims, Iota(b, {b})));
      Instruction* rb = Tag(b_.Broadcast(rhs, dims, Iota(b, {b + 1})));
      out = Tag(b_.Binary(mul, lb, rb));
    } else if (row) {
      // A matrix-vector product: each output sums one contiguous lhs row times the vector,
      // as a row reduction (vectorised along the row; split across threads when long),
      // where a tiled product would have one lane of work per row.
      Instruction* rb = Tag(b_.Broadcast(rhs, With({m_, k_}), Iota(b, {b + 1})));
      out = Sum(Tag(b_.Binary(mul, lhs, rb)), b + 1, combiners);
    } else if (column) {
      // A vector-matrix product: a column reduction of the rhs rows times the vector's
      // elements, vectorised along the rhs rows and split across threads where long. A
      // tiled product of one row packs all of the rhs first (5x as long for [1024] @
      // [1024, 1024]), or unpacked, walks it a column strip at a time (4x).
      Instruction* lb = Tag(b_.Broadcast(lhs, With({k_, n_}), Iota(b, {b})));
      out = Sum(Tag(b_.Binary(mul, lb, rhs)), b, combiners);
    } else {
      InstructionAttrs attrs;
      for (int d = 0; d < b; ++d) {
        attrs.dot.lhs_batch.push_back(d);
        attrs.dot.rhs_batch.push_back(d);
      }
      attrs.dot.lhs_contracting = {b + 1};
      attrs.dot.rhs_contracting = {b};
      const int64_t padded = PaddedN();
      if (padded != n_) {
        InstructionAttrs pad;
        pad.padding.assign(b + 2, PadDim{});
        pad.padding[b + 1].high = padded - n_;
        rhs = Tag(b_.Add(Opcode::kPad, {rhs, Tag(b_.ScalarConstant(t, 0))}, pad));
      }
      out = Tag(b_.Add(Opcode::kDot, {lhs, rhs}, attrs));
      if (padded != n_) {
        InstructionAttrs slice;
        slice.slice.starts.assign(b + 2, 0);
        slice.slice.limits = With({m_, n_});
        slice.slice.strides.assign(b + 2, 1);
        out = Tag(b_.Add(Opcode::kSlice, {out}, slice));
      }
    }
    if (!out->shape().SameDims(dot_->shape())) out = Tag(b_.Reshape(out, dot_->shape().dims()));
    dot_->ReplaceAllUsesWith(out);
    b_.computation()->RemoveInstruction(dot_);
    return true;
  }

 private:
  // [batch..., M, K] x [batch..., K, N] with batch dimensions leading in order: the layout the
  // CPU's tiled product reads (kernel_plan.cc, FindDotTile).
  bool IsCanonical(const Shape& l, const Shape& r) const {
    if (l.rank() != batch_ + 2 || r.rank() != batch_ + 2) return false;
    for (int d = 0; d < batch_; ++d) {
      if (dd_.lhs_batch[d] != d || dd_.rhs_batch[d] != d) return false;
    }
    return dd_.lhs_contracting == std::vector<int64_t>{batch_ + 1} &&
           dd_.rhs_contracting == std::vector<int64_t>{batch_};
  }

  // The columns the tiled product computes: N, or on a CPU with vector lanes, N rounded up
  // to whole vectors (a power of two below the lanes; see dot_layout.h).
  int64_t PaddedN() const {
    // A small product (a step of a loop over a few environments) is left as it is: its
    // leftover columns cost less than the pad and slice kernels would.
    int64_t work = m_ * n_ * k_;
    for (int64_t d : batch_dims_) work *= d;
    if (lanes_ <= 1 || n_ <= 1 || work < kMinPaddedWork) return n_;
    if (n_ < lanes_) {
      int64_t p = 1;
      while (p < n_) p *= 2;
      return p;
    }
    auto round_up = [](int64_t n, int64_t to) { return (n + to - 1) / to * to; };
    int64_t whole = round_up(n_, lanes_);
    // The tile's span (kernel_plan.cc, FindDotTile): 4 vectors where a vector fills a
    // 64-byte register, else 2. Columns past the last whole span took twice as long each
    // as tiled ones ([8192, 512] @ [512, 96]: 8.8 ms, @ [512, 128]: 5.9 ms): rounded up to
    // a whole span where that adds fewer columns than it leaves over.
    const int64_t span = (lanes_ * std::max<int64_t>(4, DTypeBytes(dot_->dtype())) >= 64 ? 4 : 2) * lanes_;
    const int64_t rest = whole % span;
    return whole > span && rest * 2 >= span ? round_up(whole, span) : whole;
  }

  // The sum of `products` over `dim` (for pred: any).
  Instruction* Sum(Instruction* products, int64_t dim, std::map<DType, Computation*>& combiners) {
    DType t = products->dtype();
    Computation*& add = combiners[t];
    if (!add) add = MakeScalarCombiner(module_, IsPred(t) ? Opcode::kOr : Opcode::kAdd, t);
    return Tag(b_.Reduce(products, Tag(b_.ScalarConstant(t, 0)), {dim}, add));
  }

  // The batch dimensions followed by `rest`.
  std::vector<int64_t> With(std::vector<int64_t> rest) const {
    std::vector<int64_t> dims = batch_dims_;
    dims.insert(dims.end(), rest.begin(), rest.end());
    return dims;
  }

  // 0 .. n-1 followed by `rest`: broadcast dimensions that keep the batch.
  static std::vector<int64_t> Iota(int n, std::vector<int64_t> rest) {
    std::vector<int64_t> dims(n);
    std::iota(dims.begin(), dims.end(), 0);
    dims.insert(dims.end(), rest.begin(), rest.end());
    return dims;
  }

  // `x` transposed to `order` and reshaped to [batch..., dims...]. The transpose is a
  // kernel of its own (one pass over the operand); the reshape only reinterprets it.
  Instruction* Canonical(Instruction* x, const std::vector<int64_t>& order, std::vector<int64_t> rest) {
    if (!IsIdentity(order)) {
      InstructionAttrs attrs;
      attrs.dimensions = order;
      x = Tag(b_.Add(Opcode::kTranspose, {x}, attrs));
    }
    std::vector<int64_t> dims = With(std::move(rest));
    return x->shape().dims() == dims ? x : Tag(b_.Reshape(x, dims));
  }

  Instruction* Tag(Instruction* i) {
    i->set_metadata(dot_->metadata());
    return i;
  }

  Module& module_;
  Builder b_;
  Instruction* dot_;
  const DotDims dd_;
  const int lanes_;
  int batch_ = 0;
  std::vector<int64_t> lfree_, rfree_, batch_dims_;
  int64_t m_ = 1, n_ = 1, k_ = 1;
};

}  // namespace

bool DotLayoutPass::Run(Module& module) {
  bool changed = false;
  std::map<DType, Computation*> combiners;
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* dot : c->MakePostOrder()) {
      if (dot->opcode() != Opcode::kDot || !dot->shape().IsArray()) continue;
      changed = DotRewriter(module, c, dot, lanes_).Run(combiners) || changed;
    }
  }
  return changed;
}

}  // namespace fj
