// stablehlo.reduce. A body that is one recognised binary op of its two
// parameters maps to MLX's reductions; the init value is then combined once
// (init is any value, not necessarily the identity). JAX's argmax/argmin
// body maps to MLX reductions too. Other bodies and multi-operand reduces
// run the body as a pairwise tree. Reducing
// over an empty dimension returns the init value broadcast (MLX's max/min
// throw there).
#include <cstdint>
#include <mlx/primitives.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <algorithm>
#include <map>

#include "backend/mlx/mlx_rules.h"
#include "backend/mlx/ops/combiner.h"

namespace pjrtx::backend {

namespace {

using namespace ops;
using compiler::Opcode;

// Set by the frontend (pjrtx/frontend/walker.py) on a reduce whose result's
// zero sign no consumer can observe.
constexpr const char* kSignFreeAttr = "pjrtx.zero_sign_free";
// Set on a reduce whose every use is a broadcast_in_dim.
constexpr const char* kKeepDimsAttr = "pjrtx.keepdims_uses";

// XLA's float max/min order -0 below +0; MLX's max/min reductions keep
// whichever zero they meet. A zero result is +0 for max iff some element is
// +0, and -0 for min iff some element is -0. Where the max is a zero, every
// element is <= 0, and +0 is the only one whose sign bit is clear: so the
// integer max of the bit patterns is >= 0 iff a +0 is there (for min, the
// integer min is < 0 iff a -0 is). One integer reduction of a view, where
// a flag per element would take a kernel more before its reduction.
mx::array fix_zero_sign(Combiner c, const mx::array& x, const mx::array& r,
                        const std::vector<int>& axes, DType t, bool keep) {
  // Scalars, not zeros_like (a Full node each); the signed zeros come from
  // r itself (|r| and -|r| where r is a zero), as a fused kernel reads a -0
  // constant as +0.
  mx::Dtype it = signed_of_width(compiler::dtype_bits(t));
  mx::array bits = mx::view(x, it);
  mx::array izero = mx::array(0, it);
  mx::array present = c == Combiner::kMax ? mx::greater_equal(mx::max(bits, axes, keep), izero)
                                          : mx::less(mx::min(bits, axes, keep), izero);
  mx::array zero = mx::array(0.0f, x.dtype());
  mx::array pos_zero = mx::abs(r), neg_zero = mx::negative(pos_zero);
  mx::array signed_zero = c == Combiner::kMax ? mx::where(present, pos_zero, neg_zero)
                                              : mx::where(present, neg_zero, pos_zero);
  return mx::where(mx::equal(r, zero), signed_zero, r);
}

// Whether MLX's compile might fuse a negate of `a` into the kernel that
// computes `a`. Scatters, gathers, matmuls, convolutions and arrays without
// a producer certainly cannot (there the negate is a kernel of its own
// unless it moves after the sum); any other producer is assumed to, and
// the negate stays where JAX put it.
bool fusable_producer(const mx::array& a) {
  if (!a.has_primitive()) return false;
  const char* n = a.primitive().name();
  for (const char* p : {"Scatter", "Gather", "Matmul", "Convolution"})
    if (std::strncmp(n, p, std::strlen(p)) == 0) return false;
  return true;
}

// A float sum over at least this many elements goes in two stages. (At
// 2^15, NumPyro's Polya-Gamma test, a logsumexp over 20,000 f32 terms,
// integrated the density to 0.99989 where XLA:CPU gets 0.99995, and it
// asks rtol 1e-4.)
constexpr int64_t kBlockedSumMin = int64_t{1} << 12;

// Sums of many float terms as a tree: groups of kSumGroup terms, then
// groups of those sums, and so on (as XLA:CPU's tree reduction rewrite
// does). MLX's CPU reduction accumulates each SIMD lane sequentially, so
// its error grows with n: 250,000 f32 terms of 500 sum to 124,536,880
// where the exact (and XLA:CPU's) sum is 125,000,000, and 10^7 uniform
// terms in [400, 401) are off by 2e-5 relative (XLA:CPU: 2.5e-8). The
// reduced axes must be one run of adjacent dims (merged by a reshape, a
// view for contiguous data); other reductions, and small ones, are MLX's.
constexpr int kSumGroup = 256;

std::optional<mx::array> blocked_sum(const mx::array& x, std::vector<int> axes, bool keep) {
  if (!mx::issubdtype(x.dtype(), mx::floating) || axes.empty()) return std::nullopt;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[0] + static_cast<int>(i)) return std::nullopt;
  int64_t n = 1;
  for (int a : axes) n *= x.shape(a);
  if (n < kBlockedSumMin) return std::nullopt;
  const int a0 = axes.front();
  mx::Shape merged(x.shape().begin(), x.shape().begin() + a0);
  merged.push_back(static_cast<int>(n));
  merged.insert(merged.end(), x.shape().begin() + axes.back() + 1, x.shape().end());
  mx::array y = mx::reshape(x, merged);
  while (n > kSumGroup) {
    // whole groups (a view, then a reshape) and the tail's own sum
    const int64_t whole = n / kSumGroup * kSumGroup;
    mx::Shape lo(y.ndim(), 0), hi = y.shape();
    hi[a0] = static_cast<int>(whole);
    mx::array head = mx::slice(y, lo, hi);
    mx::Shape split = head.shape();
    split[a0] = static_cast<int>(whole / kSumGroup);
    split.insert(split.begin() + a0 + 1, kSumGroup);
    mx::array next = mx::sum(mx::reshape(head, split), a0 + 1, false);
    n = whole / kSumGroup;
    if (whole < y.shape(a0)) {
      lo[a0] = static_cast<int>(whole);
      hi[a0] = y.shape(a0);
      next = mx::concatenate({next, mx::sum(mx::slice(y, lo, hi), a0, true)}, a0);
      n += 1;
    }
    y = next;
  }
  mx::array r = mx::sum(y, a0, false);
  if (!keep) return r;
  mx::Shape kept = x.shape();
  for (int a : axes) kept[a] = 1;
  return mx::reshape(r, kept);
}

mx::array float_sum(const mx::array& x, const std::vector<int>& axes, bool keep) {
  if (auto r = blocked_sum(x, axes, keep)) return *r;
  return mx::sum(x, axes, keep);
}

// sign_free: the frontend proved that no consumer can tell -0 from +0 in
// the result (JAX's softmax: exp(x - max)), so MLX's max/min stand as they
// are. keep: the reduced axes stay as size-1 dims (MLX's keepdims).
mx::array reduce_with(Combiner c, const mx::array& x, const std::vector<int>& axes, DType t,
                      bool sign_free, bool keep) {
  bool is_float = compiler::is_float(t) && !sign_free;
  switch (c) {
    case Combiner::kAdd: {
      // sum(-u) is -sum(u): negation commutes with every rounding, and
      // XLA:CPU hoists the negate out of the reduce too (an all-zero row
      // gives -0 there, where accumulating -u from +0 would give +0). The
      // negate then fuses into the sum's consumers instead of being a
      // kernel of its own (the gradient of log_softmax sums a negated
      // cotangent). Kept dims, so a reshape of the result looks through
      // the squeeze to the negate (no Reshape node of its own).
      if (compiler::is_float(t) && x.has_primitive() &&
          x.inputs().size() == 1 && x.siblings().empty() &&
          std::strcmp(x.primitive().name(), "Negative") == 0 &&
          !fusable_producer(x.inputs()[0])) {
        mx::array r = mx::negative(float_sum(x.inputs()[0], axes, true));
        return keep ? r : mx::squeeze(r, axes);
      }
      return float_sum(x, axes, keep);
    }
    case Combiner::kMul: return mx::prod(x, axes, keep);
    case Combiner::kMax: {
      mx::array r = mx::max(x, axes, keep);
      return is_float ? fix_zero_sign(c, x, r, axes, t, keep) : r;
    }
    case Combiner::kMin: {
      mx::array r = mx::min(x, axes, keep);
      return is_float ? fix_zero_sign(c, x, r, axes, t, keep) : r;
    }
    case Combiner::kAnd: return mx::all(x, axes, keep);
    case Combiner::kOr: return mx::any(x, axes, keep);
  }
  return x;
}

// Any body, any number of operands: a pairwise tree over the reduced
// elements (log2(n) batched runs of the body), then the init folded in once.
// XLA assumes the body is associative and commutative, so the tree order
// gives its results; JAX's argmax/argmin bodies (value, index) pick the
// lower index on ties and NaN over numbers, which is order-independent.
Arrays tree_reduce(const RegionProgram& body, RunState& st, Arrays xs, const Arrays& inits,
                   const std::vector<int>& axes, const mx::Shape& out_shape, bool pairs = false) {
  size_t k = xs.size();
  // c128 operands (pairs) keep their (re, im) dim last, after the reduced one.
  int rank = static_cast<int>(xs[0].ndim()) - pairs;
  std::vector<int> perm;
  for (int d = 0; d < rank; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) perm.push_back(d);
  perm.insert(perm.end(), axes.begin(), axes.end());
  if (pairs) perm.push_back(rank);
  // The reduced dims flattened into one (an explicit size: -1 cannot be
  // inferred when the kept dims hold no elements).
  int reduced = 1;
  for (int a : axes) reduced *= xs[0].shape(a);
  mx::Shape flat = out_shape;
  if (pairs) flat.pop_back();
  flat.push_back(reduced);
  if (pairs) flat.push_back(2);
  for (auto& x : xs) x = reshape_if_needed(transpose_if_needed(x, perm), flat);
  int last = static_cast<int>(flat.size()) - 1 - pairs;
  int n = xs[0].shape(last);
  auto cut = [&](const mx::array& x, int start, int stop, int step) {
    mx::Shape lo(x.ndim(), 0), hi = x.shape(), st(x.ndim(), 1);
    lo[last] = start;
    hi[last] = stop;
    st[last] = step;
    return mx::slice(x, lo, hi, st);
  };
  while (n > 1) {
    int half = n / 2;
    Arrays args;
    for (const auto& x : xs) args.push_back(cut(x, 0, 2 * half, 2));
    for (const auto& x : xs) args.push_back(cut(x, 1, 2 * half, 2));
    Arrays next = body.run_batched(st, args);
    if (n % 2)
      for (size_t i = 0; i < k; ++i) next[i] = mx::concatenate({next[i], cut(xs[i], n - 1, n, 1)}, last);
    xs = std::move(next);
    n = half + n % 2;
  }
  Arrays args = inits;
  for (const auto& x : xs) args.push_back(mx::squeeze(x, last));
  Arrays out = body.run_batched(st, args);
  for (size_t i = 0; i < k; ++i) out[i] = mx::broadcast_to(out[i], out_shape);
  return out;
}

// JAX's argmax/argmin: a reduce of (values, indices) along one dimension
// whose body, with params (va, ia, vb, ib), is
//   pick  = compare(va, vb, GT|LT) or compare(va, va, NE)       (NaN wins)
//   pickI = pick or (compare(va, vb, EQ) and compare(ia, ib, LT)) (ties: lower index)
//   return select(pick, va, vb), select(pickI, ia, ib)
// Returns +1 for argmax (GT), -1 for argmin (LT), 0 for any other body.
int match_arg_reduce(const compiler::Region& body) {
  if (body.params.size() != 4 || body.returns.size() != 2) return 0;
  std::map<compiler::ValueId, const compiler::Instruction*> def;
  for (const auto& inst : body.body)
    if (inst.results.size() == 1) def[inst.results[0]] = &inst;
  auto va = body.params[0], ia = body.params[1], vb = body.params[2], ib = body.params[3];
  auto get = [&](compiler::ValueId v, Opcode op) -> const compiler::Instruction* {
    auto it = def.find(v);
    return it != def.end() && it->second->op == op && it->second->operands.size() ==
                                   (op == Opcode::select ? 3u : 2u) ? it->second : nullptr;
  };
  auto dir = [](const compiler::Instruction* c) {
    return c->attr_str("comparison_direction", "");
  };
  auto is_cmp = [&](compiler::ValueId v, compiler::ValueId a, compiler::ValueId b,
                    const char* d) {
    const auto* c = get(v, Opcode::compare);
    return c && c->operands[0] == a && c->operands[1] == b && dir(c) == d;
  };
  // Either operand order of a commutative and/or.
  auto pair = [&](compiler::ValueId v, Opcode op, auto&& first, auto&& second) {
    const auto* i = get(v, op);
    if (!i) return false;
    auto x = i->operands[0], y = i->operands[1];
    return (first(x) && second(y)) || (first(y) && second(x));
  };
  const auto* sv = get(body.returns[0], Opcode::select);
  const auto* si = get(body.returns[1], Opcode::select);
  if (!sv || !si || sv->operands[1] != va || sv->operands[2] != vb || si->operands[1] != ia ||
      si->operands[2] != ib)
    return 0;
  auto pick = sv->operands[0];
  int sign = 0;
  auto order = [&](compiler::ValueId v) {
    if (is_cmp(v, va, vb, "GT")) return (sign = 1), true;
    if (is_cmp(v, va, vb, "LT")) return (sign = -1), true;
    return false;
  };
  auto nan = [&](compiler::ValueId v) { return is_cmp(v, va, va, "NE"); };
  if (!pair(pick, Opcode::or_, order, nan)) return 0;
  auto is_pick = [&](compiler::ValueId v) { return v == pick; };
  auto tie = [&](compiler::ValueId v) {
    return pair(v, Opcode::and_, [&](compiler::ValueId e) { return is_cmp(e, va, vb, "EQ"); },
                [&](compiler::ValueId l) { return is_cmp(l, ia, ib, "LT"); });
  };
  if (!pair(si->operands[0], Opcode::or_, is_pick, tie)) return 0;
  return sign;
}

mx::array int_max_of(mx::Dtype dt) {
  switch (dt.size()) {
    case 1: return mx::array(dt == mx::uint8 ? int64_t{255} : int64_t{127}, dt);
    case 2: return mx::array(dt == mx::uint16 ? int64_t{65535} : int64_t{32767}, dt);
    case 4:
      return mx::array(dt == mx::uint32 ? int64_t{4294967295} : int64_t{2147483647}, dt);
    default:
      return dt == mx::uint64 ? mx::array(uint64_t{18446744073709551615ull}, dt)
                              : mx::array(int64_t{9223372036854775807}, dt);
  }
}

// The body's answer computed directly: the extreme value (any NaN beats
// every number), the lowest index among the elements that reach it (XLA
// assumes index order is the reduction order, as JAX's iota indices are),
// and that element's value (so -0 vs +0 and NaN payloads are the chosen
// element's). One reduction per step instead of log2(n) rounds of the body.
Arrays arg_reduce(int sign, const mx::array& x, const mx::array& idx, int axis, bool is_float) {
  mx::array m = sign > 0 ? mx::max(x, axis, true) : mx::min(x, axis, true);
  mx::array cand = mx::equal(x, m);
  if (is_float) {
    mx::array nans = mx::isnan(x);
    cand = mx::where(mx::any(nans, axis, true), nans, cand);
  }
  mx::array key = mx::where(cand, idx, int_max_of(idx.dtype()));
  mx::array pos = mx::argmin(key, axis, true);
  return {mx::squeeze(mx::take_along_axis(x, pos, axis), axis),
          mx::squeeze(mx::take_along_axis(idx, pos, axis), axis)};
}

// Whether v is a constant equal to 0, 1, ..., n-1 along `axis` (JAX's
// iota operand of argmax/argmin), checked once at compile time.
bool iota_along(LowerCtx& ctx, compiler::ValueId v, int axis) {
  auto c = ctx.constant_value(v);
  if (!c || axis >= static_cast<int>(c->ndim())) return false;
  mx::Device cpu = mx::Device::cpu;
  mx::Shape shape(c->ndim(), 1);
  shape[axis] = c->shape(axis);
  mx::array want = mx::reshape(mx::arange(c->shape(axis), mx::int64, cpu), shape, cpu);
  mx::array same = mx::all(mx::equal(mx::astype(*c, mx::int64, cpu), want, cpu), cpu);
  same.eval();
  return same.item<bool>();
}

// Whether the init pair of an argmax (sign > 0) / argmin is (-inf / +inf, 0).
bool argmax_init(LowerCtx& ctx, compiler::ValueId value, compiler::ValueId index, int sign) {
  auto v = ctx.constant_value(value), i = ctx.constant_value(index);
  if (!v || !i || v->size() != 1 || i->size() != 1) return false;
  mx::array vd = mx::astype(mx::reshape(*v, {}, mx::Device::cpu), mx::float64, mx::Device::cpu);
  mx::array id = mx::astype(mx::reshape(*i, {}, mx::Device::cpu), mx::int64, mx::Device::cpu);
  vd.eval();
  id.eval();
  double want = sign > 0 ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
  return vd.item<double>() == want && id.item<int64_t>() == 0;
}

Kernel lower_reduce(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  size_t k = ctx.num_out();
  if (k == 0 || ctx.num_in() != 2 * k) ctx.fail("expects 2N operands for N results, got ", ctx.num_in());
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  std::vector<int> axes = to_int_vector(inst.attr_ints("dimensions"));
  bool empty = false;
  for (int a : axes) {
    if (a < 0 || a >= in.rank()) ctx.fail("dimension ", a, " out of range for ", in.str());
    if (in.shape[a] == 0) empty = true;
  }
  // complex128 (stored as f64 pairs, complex128.h) reduces through its body.
  const bool pairs = in.dtype == DType::kC128;
  if (pairs)
    for (size_t i = 0; i < 2 * k; ++i)
      if (ctx.in(i).dtype != DType::kC128)
        ctx.fail("a reduction of complex128 with other types is not supported: ", ctx.in(i).str());
  mx::Shape out_shape = storage_shape(out);
  if (empty) {
    // The init values, broadcast (MLX's max/min throw on empty axes).
    return [k, out_shape](RunState&, const Arrays& args) {
      Arrays r;
      for (size_t i = 0; i < k; ++i) r.push_back(mx::broadcast_to(args[k + i], out_shape));
      return r;
    };
  }
  if (axes.empty()) {
    // No dimensions: XLA:CPU returns the operands unchanged, without applying
    // a non-identity init (its simplifier drops the reduce; XLA assumes the
    // init is the body's identity).
    return [k](RunState&, const Arrays& args) { return Arrays(args.begin(), args.begin() + k); };
  }
  auto combiner = k == 1 && !pairs ? match_combiner(inst.regions.at(0), in.dtype) : std::nullopt;
  // (Outputs with no elements take the general path: MLX's arg reductions
  // refuse empty arrays.)
  bool no_outputs = std::any_of(out.shape.begin(), out.shape.end(), [](int64_t d) { return d == 0; });
  int arg = k == 2 && axes.size() == 1 && ctx.in(1).rank() == in.rank() && !no_outputs &&
                    (compiler::is_float(in.dtype) || compiler::is_integer(in.dtype)) &&
                    compiler::is_integer(ctx.in(1).dtype)
                ? match_arg_reduce(inst.regions.at(0))
                : 0;
  if (arg != 0 && compiler::is_float(in.dtype) && iota_along(ctx, inst.operands[1], axes[0]) &&
      argmax_init(ctx, inst.operands[2], inst.operands[3], arg) &&
      mlx_arg_rule_holds(to_mlx(in.dtype))) {
    // JAX's argmax/argmin: the indices are an iota along the axis and the
    // init pair is (-inf or +inf, 0), which the body hands back every
    // reduced pair unchanged. Where MLX's argmax/argmin answer with the
    // first NaN, else the lowest index of the extreme, -0 and +0 equal
    // (NumPy's rule, which is JAX's body; checked on the device, see
    // mlx_rules.h), MLX's answer is the index: one reduction, no keys, no
    // fold. Elsewhere the general path below computes it from max/min.
    int axis = axes[0];
    mx::Dtype it = to_mlx(ctx.out(1).dtype);
    mx::Shape idx_shape = to_mlx_shape(ctx.out(1).shape);
    return [arg, axis, it, out_shape, idx_shape](RunState&, const Arrays& args) {
      const mx::array& x = args[0];
      mx::array pos = arg > 0 ? mx::argmax(x, axis, true) : mx::argmin(x, axis, true);
      mx::array value = mx::reshape(mx::take_along_axis(x, pos, axis), out_shape);
      return Arrays{value, mx::reshape(mx::astype(pos, it), idx_shape)};
    };
  }
  if (arg != 0) {
    // The init pair is folded in by one run of the body, as in tree_reduce.
    auto body = ctx.lower_region(inst.regions.at(0));
    int axis = axes[0];
    bool is_float = compiler::is_float(in.dtype);
    return [body, arg, axis, is_float, out_shape](RunState& st, const Arrays& args) {
      Arrays r = arg_reduce(arg, args[0], args[1], axis, is_float);
      Arrays folded = body->run_batched(st, {args[2], args[3], r[0], r[1]});
      for (auto& a : folded) a = mx::broadcast_to(a, out_shape);
      return folded;
    };
  }
  if (!combiner) {
    std::sort(axes.begin(), axes.end());
    auto body = ctx.lower_region(inst.regions.at(0));
    return [k, body, axes, out_shape, pairs](RunState& st, const Arrays& args) {
      return tree_reduce(*body, st, Arrays(args.begin(), args.begin() + k),
                         Arrays(args.begin() + k, args.end()), axes, out_shape, pairs);
    };
  }
  mx::Dtype dt = to_mlx(out.dtype);
  Combiner c = *combiner;
  DType t = in.dtype;
  // Reducing only size-1 dims is a reshape, and the init is not applied:
  // XLA's simplifier makes the same reshape (it assumes the init is the
  // body's identity), as for a reduce over no dims above.
  int64_t reduced = 1;
  for (int a : axes) reduced *= in.shape[a];
  bool unit_dims = reduced == 1;
  // Combining the result with an init that is the combiner's identity (max
  // with -inf, min with +inf, int sum with 0, ...) changes no bit, so it is
  // left out. For a float sum +0 is an identity only because the sum is
  // never -0: MLX's reductions of two or more elements accumulate from +0.
  // (is_identity reads a complex init by its real part: complex inits stay.)
  auto init = ctx.constant_value(inst.operands[1]);
  bool skip_init = unit_dims || (init && !compiler::is_complex(t) && is_identity(c, *init, t));
  bool sign_free = inst.attr_bool(kSignFreeAttr, false);
  // Every use re-inserts the reduced dims (JAX's keepdims: a broadcast_in_dim
  // of the result): reduce with MLX's keepdims and reshape, so that the
  // broadcast's reshape looks through to the keepdims array (no node) and
  // the reshape here is never evaluated.
  bool keep = inst.attr_bool(kKeepDimsAttr, false) && !unit_dims;
  return binary([c, axes, dt, t, skip_init, unit_dims, out_shape, sign_free, keep](
                    const mx::array& x, const mx::array& init) {
    mx::array r = unit_dims ? reshape_if_needed(x, out_shape)
                            : reduce_with(c, x, axes, t, sign_free, keep);
    // sum/prod of narrow ints and bools come back widened: cast back (the
    // wrapped result is the same as accumulating in the narrow type).
    if (r.dtype() != dt) r = mx::astype(r, dt);
    if (!skip_init) r = combine(c, r, init, t);
    return keep ? mx::reshape(r, out_shape) : r;
  });
}

}  // namespace

void register_reduce_ops(Registry& r) {
  r.add(compiler::Opcode::reduce, lower_reduce);
}

}  // namespace pjrtx::backend
