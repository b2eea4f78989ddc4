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
// Rows below which a product that could be computed transposed at no cost is: a few row
// tiles cannot be shared among threads.
constexpr int64_t kFewRows = 16;
// The most rows a thread's chunk of a tiled product has (kernel_plan.cc, kDotChunkRows).
constexpr int64_t kChunkRows = 64;
// A tiled product's multiply-adds that take the time of one element transposed on one of
// two threads (0.26 ns against 16-lane fused multiply-adds two a cycle).
constexpr int64_t kProductPerMovedElement = 64;

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
    if (!small && IsCanonical(l, r) && PaddedN(n_) == n_ && !OneChunkOfRows()) return false;

    // lhs as [batch..., M, K], rhs as [batch..., K, N]: contracting dimensions in the order
    // they pair up, so that the flattened K walks both alike.
    std::vector<int64_t> lorder = Order(dd_.lhs_batch, lfree_, dd_.lhs_contracting);
    std::vector<int64_t> rorder = Order(dd_.rhs_batch, dd_.rhs_contracting, rfree_);
    // Which form (dot_layout.h); operands of one row or column become vectors.
    const bool outer = k_ == 1, row = !outer && n_ == 1, column = !outer && !row && m_ == 1;
    using Dims = std::vector<int64_t>;
    Instruction* out;
    DType t = dot_->dtype();
    Opcode mul = IsPred(t) ? Opcode::kAnd : Opcode::kMultiply;
    const int b = batch_;
    if (!outer && !row && !column) {
      // The tiled product reads its lhs as [M, K] or as [K, M] (contracting first, as the
      // gradient of x @ w reads x); its rhs as [K, N]. Where the operands lie otherwise,
      // they are transposed by kernels of their own, or the product is computed
      // transposed, as (rhs^T lhs^T)^T, where that moves fewer elements (Swap).
      std::vector<int64_t> lT = Order(dd_.lhs_batch, dd_.lhs_contracting, lfree_);
      std::vector<int64_t> rT = Order(dd_.rhs_batch, rfree_, dd_.rhs_contracting);
      if (Swap(lorder, lT, rorder, rT)) {
        Instruction* product = IsIdentity(rT) || !IsIdentity(rorder)
                                   ? Tiled(Canonical(dot_->operand(1), rT, Dims{n_, k_}), false,
                                           Canonical(dot_->operand(0), lT, Dims{k_, m_}), n_, m_)
                                   : Tiled(Canonical(dot_->operand(1), rorder, Dims{k_, n_}), true,
                                           Canonical(dot_->operand(0), lT, Dims{k_, m_}), n_, m_);
        InstructionAttrs back;
        back.dimensions = Iota(b, {b + 1, b});
        out = Tag(b_.Add(Opcode::kTranspose, {product}, back));
      } else {
        Instruction* rhs = Canonical(dot_->operand(1), rorder, Dims{k_, n_});
        out = IsIdentity(lorder) || !IsIdentity(lT)
                  ? Tiled(Canonical(dot_->operand(0), lorder, Dims{m_, k_}), false, rhs, m_, n_)
                  : Tiled(Canonical(dot_->operand(0), lT, Dims{k_, m_}), true, rhs, m_, n_);
      }
    } else if (row && ReducesLhsInPlace()) {
      // A matrix-vector product whose lhs has its contracting dimension before a run of
      // free ones at least a vector long (einsum('bkh,bk->bh'), a weighted sum over a few
      // rows): summed where it lies, a reduction over a major dimension vectorised along
      // the run. Transposed to rows of K first, rows shorter than a vector went one element
      // at a time ([32, 10, 40] after a tanh: 107 us, in place 27).
      const Shape& ls = dot_->operand(0)->shape();
      Instruction* rhs = Canonical(dot_->operand(1), rorder, Dims{k_});
      std::vector<int64_t> to = Iota(b, {dd_.lhs_contracting[0]});
      Instruction* rb = Tag(b_.Broadcast(rhs, ls.dims(), to));
      out = Sum(Tag(b_.Binary(mul, dot_->operand(0), rb)), dd_.lhs_contracting[0], combiners);
    } else {
      Instruction* lhs = Canonical(dot_->operand(0), lorder, outer ? Dims{m_} : column ? Dims{k_} : Dims{m_, k_});
      Instruction* rhs = Canonical(dot_->operand(1), rorder, outer ? Dims{n_} : row ? Dims{k_} : Dims{k_, n_});
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
      }
    }
    if (!out->shape().SameDims(dot_->shape())) out = Tag(b_.Reshape(out, dot_->shape().dims()));
    dot_->ReplaceAllUsesWith(out);
    b_.computation()->RemoveInstruction(dot_);
    return true;
  }

 private:
  // The tiled product of lhs [batch..., m, k] (or [batch..., k, m]: `lhs_transposed`) and
  // rhs [batch..., k, n]: [batch..., m, n], its rhs columns padded to whole vectors where
  // that pays (PaddedN) and sliced back.
  Instruction* Tiled(Instruction* lhs, bool lhs_transposed, Instruction* rhs, int64_t m, int64_t n) {
    const int b = batch_;
    InstructionAttrs attrs;
    for (int d = 0; d < b; ++d) {
      attrs.dot.lhs_batch.push_back(d);
      attrs.dot.rhs_batch.push_back(d);
    }
    attrs.dot.lhs_contracting = {lhs_transposed ? b : b + 1};
    attrs.dot.rhs_contracting = {b};
    const int64_t padded = PaddedN(n);
    if (padded != n) {
      InstructionAttrs pad;
      pad.padding.assign(b + 2, PadDim{});
      pad.padding[b + 1].high = padded - n;
      rhs = Tag(b_.Add(Opcode::kPad, {rhs, Tag(b_.ScalarConstant(dot_->dtype(), 0))}, pad));
    }
    Instruction* out = Tag(b_.Add(Opcode::kDot, {lhs, rhs}, attrs));
    if (padded == n) return out;
    InstructionAttrs slice;
    slice.slice.starts.assign(b + 2, 0);
    slice.slice.limits = With({m, n});
    slice.slice.strides.assign(b + 2, 1);
    return Tag(b_.Add(Opcode::kSlice, {out}, slice));
  }

  // Whether a matrix-vector product sums its lhs where it lies (Run): one contracting
  // dimension, after the batch dimensions (leading, in order) and before free dimensions
  // whose elements make at least a vector.
  bool ReducesLhsInPlace() const {
    const Shape& l = dot_->operand(0)->shape();
    if (dd_.lhs_contracting.size() != 1 || lanes_ <= 1) return false;
    for (int d = 0; d < batch_; ++d) {
      if (dd_.lhs_batch[d] != d) return false;
    }
    const int64_t k = dd_.lhs_contracting[0];
    int64_t run = 1;
    for (int64_t d = k + 1; d < l.rank(); ++d) run *= l.dim(d);
    return k >= batch_ && k < l.rank() - 1 && run >= lanes_;
  }

  // `first`, then `second`, then `third`: an operand's dimensions in a layout's order.
  static std::vector<int64_t> Order(std::vector<int64_t> first, const std::vector<int64_t>& second,
                                    const std::vector<int64_t>& third) {
    first.insert(first.end(), second.begin(), second.end());
    first.insert(first.end(), third.begin(), third.end());
    return first;
  }

  // Whether to compute the product transposed, as (rhs^T lhs^T)^T: where the operands'
  // layouts (`lorder` [M, K] or `lT` [K, M] for the lhs, `rorder` [K, N] or `rT` [N, K]
  // for the rhs) need transposes of fewer elements that way, counting the result's
  // transpose unless every reader transposes it back (the update of a weight from its
  // gradient, computed transposed by autodiff); and where neither way moves anything, to
  // have rows to split among threads: the gradient of an [H] x [6] policy head, dot(g, h)
  // over the batch with g [B, 6], has 6 rows one way and H the other.
  bool Swap(const std::vector<int64_t>& lorder, const std::vector<int64_t>& lT, const std::vector<int64_t>& rorder,
            const std::vector<int64_t>& rT) const {
    auto moved = [](bool in_place, int64_t elements) { return in_place ? 0 : elements; };
    int64_t canonical = moved(IsIdentity(lorder) || IsIdentity(lT), m_ * k_) + moved(IsIdentity(rorder), k_ * n_);
    bool read_transposed = dot_->user_count() > 0;
    for (const Instruction* u : dot_->users()) read_transposed = read_transposed && u->opcode() == Opcode::kTranspose;
    int64_t swapped = moved(IsIdentity(rT) || IsIdentity(rorder), k_ * n_) + moved(IsIdentity(lT), m_ * k_) +
                      moved(read_transposed, m_ * n_);
    if (swapped != canonical) {
      if (swapped < canonical) return true;
      // Rows for one thread's chunk only (a DQN's fully connected layer over a batch of 32:
      // 1.4 ms on one thread), where the transposed product has several: the transposes
      // it adds cost less than a thread's share of the product.
      return OneChunkOfRows() && (swapped - canonical) * kProductPerMovedElement <= m_ * n_ * k_;
    }
    return (m_ < kFewRows || OneChunkOfRows()) && n_ > m_;
  }

  // Whether the CPU's product has rows for one thread's chunk (kernel_plan.cc: 64), and
  // transposed, would have several. (A GPU takes a thread per element.)
  bool OneChunkOfRows() const { return lanes_ > 1 && m_ <= kChunkRows && n_ >= 4 * m_; }

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

  // The columns a tiled product of `columns` columns computes: those, or on a CPU with vector
  // lanes, rounded up to whole vectors (a power of two below the lanes; see dot_layout.h).
  int64_t PaddedN(int64_t columns) const {
    // A small product (a step of a loop over a few environments) is left as it is: its
    // leftover columns cost less than the pad and slice kernels would.
    int64_t work = m_ * n_ * k_;
    for (int64_t d : batch_dims_) work *= d;
    if (lanes_ <= 1 || columns <= 1 || work < kMinPaddedWork) return columns;
    if (columns < lanes_) {
      int64_t p = 1;
      while (p < columns) p *= 2;
      return p;
    }
    auto round_up = [](int64_t x, int64_t to) { return (x + to - 1) / to * to; };
    int64_t whole = round_up(columns, lanes_);
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

// A transpose read only by `dot` folded into the dot's dimension numbers (as XLA's
// TransposeFolding): the dot reads the transpose's operand, and the rewriter sees its real
// layout (`a.T @ b` is then read as [K, M] where it lies). Not where it would reorder the
// operand's free dimensions, whose order is the result's.
bool FoldOperandTransposes(Instruction* dot) {
  bool changed = false;
  for (int i = 0; i < 2; ++i) {
    Instruction* t = dot->operand(i);
    if (t->opcode() != Opcode::kTranspose || t->user_count() != 1 || dot->operand(1 - i) == t) continue;
    DotDims& dd = dot->mutable_attrs().dot;
    std::vector<int64_t>& batch = i == 0 ? dd.lhs_batch : dd.rhs_batch;
    std::vector<int64_t>& contracting = i == 0 ? dd.lhs_contracting : dd.rhs_contracting;
    const std::vector<int64_t>& perm = t->dimensions();
    int64_t last = -1;
    bool ordered = true;
    for (int64_t d : FreeDims(t->shape().rank(), batch, contracting)) {
      ordered = ordered && perm[d] > last;
      last = perm[d];
    }
    if (!ordered) continue;
    for (int64_t& d : batch) d = perm[d];
    for (int64_t& d : contracting) d = perm[d];
    dot->ReplaceOperandWith(i, t->operand(0));
    changed = true;
  }
  return changed;
}

}  // namespace

bool DotLayoutPass::Run(Module& module) {
  bool changed = false;
  std::map<DType, Computation*> combiners;
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* dot : c->MakePostOrder()) {
      if (dot->opcode() != Opcode::kDot || !dot->shape().IsArray()) continue;
      changed = FoldOperandTransposes(dot) || changed;
      changed = DotRewriter(module, c, dot, lanes_).Run(combiners) || changed;
    }
  }
  return changed;
}

}  // namespace fj
