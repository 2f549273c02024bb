// stablehlo.reduce_window.
//
// JAX's cumsum/cumprod/cummax/cummin arrive as a window as long as the axis
// with padding (n-1, 0) (or (0, n-1) reversed) and an identity init: those
// map to MLX's cumulative ops, O(n) instead of O(n * window); such scans
// with other bodies (cumlogsumexp) run as a parallel prefix scan of the
// body, O(n log n).
//
// Everything else (pooling) pads the input (edge padding, base dilation as
// interior padding), takes one strided slice per window offset, and
// combines the slices into the init value: a recognised body through MLX,
// any other body (and variadic windows) by running the region batched on
// the slices. Negative padding crops. Padding
// elements are skipped, as XLA:CPU does (so a non-identity init counts
// once), through a mask of the real elements unless the init is the
// body's identity.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

#include "backend/mlx/mlx_rules.h"
#include "backend/mlx/ops/combiner.h"
#include "backend/mlx/ops/window.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

// The axis and direction when the window is a cumulative scan.
std::optional<std::pair<int, bool>> cumulative_axis(const Window& w, const compiler::Shape& shape) {
  int axis = -1;
  bool reverse = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (w.strides[d] != 1 || w.base_dil[d] != 1 || w.win_dil[d] != 1) return std::nullopt;
    if (w.dims[d] == 1 && w.pad_lo[d] == 0 && w.pad_hi[d] == 0) continue;
    int64_t n = shape[d];
    if (axis >= 0 || w.dims[d] != n || n < 2) return std::nullopt;
    if (w.pad_lo[d] == n - 1 && w.pad_hi[d] == 0) reverse = false;
    else if (w.pad_lo[d] == 0 && w.pad_hi[d] == n - 1) reverse = true;
    else return std::nullopt;
    axis = static_cast<int>(d);
  }
  if (axis < 0) return std::nullopt;
  return std::make_pair(axis, reverse);
}

mx::array cumulative(Combiner c, const mx::array& x, int axis, bool reverse) {
  switch (c) {
    case Combiner::kAdd: return mx::cumsum(x, axis, reverse, true);
    case Combiner::kMul: return mx::cumprod(x, axis, reverse, true);
    case Combiner::kMax: case Combiner::kOr: return mx::cummax(x, axis, reverse, true);
    case Combiner::kMin: case Combiner::kAnd: return mx::cummin(x, axis, reverse, true);
  }
  return x;
}

// cummax/cummin with XLA's float semantics: NaN from its position on, and
// -0 below +0. MLX keeps whichever zero its comparison meets (cummax of
// [-0, +0, -0] is [-0, +0, -0] on MLX 0.32.4's CPU, [-0, +0, +0] on XLA),
// so a zero result is set to +0 for max iff a +0 has been seen so far (for
// min, to -0 iff a -0 has). Where MLX's scans do not carry NaNs on this
// device (nan_safe false, mlx_rules.h), NaNs are scanned apart.
mx::array cumulative_extreme(Combiner c, const mx::array& x, int axis, bool reverse,
                             bool nan_safe) {
  const bool is_max = c == Combiner::kMax;
  const mx::Dtype dt = x.dtype();
  auto scan = [&](const mx::array& a) {
    return is_max ? mx::cummax(a, axis, reverse, true) : mx::cummin(a, axis, reverse, true);
  };
  auto seen = [&](const mx::array& flag) {  // whether flag held so far, in scan order
    return mx::astype(mx::cummax(mx::astype(flag, mx::uint8), axis, reverse, true), mx::bool_);
  };
  const double inf = std::numeric_limits<double>::infinity();
  mx::array nan = mx::isnan(x);
  mx::array r = nan_safe ? scan(x) : scan(mx::where(nan, mx::array(is_max ? -inf : inf, dt), x));
  const mx::Dtype it = dt.size() == 2 ? mx::int16 : dt.size() == 4 ? mx::int32 : mx::int64;
  mx::array negative = mx::less(mx::view(x, it), mx::array(0, it));
  mx::array zero = mx::equal(x, mx::array(0.0, dt));
  mx::array wanted = mx::logical_and(zero, is_max ? mx::logical_not(negative) : negative);
  // max: +0 once a +0 was seen, else -0; min: -0 once a -0 was seen, else +0.
  mx::array z = mx::where(seen(wanted), mx::array(is_max ? 0.0 : -0.0, dt),
                          mx::array(is_max ? -0.0 : 0.0, dt));
  r = mx::where(mx::equal(r, mx::array(0.0, dt)), z, r);
  if (!nan_safe)
    r = mx::where(seen(nan), mx::array(std::numeric_limits<double>::quiet_NaN(), dt), r);
  return r;
}

// An inclusive scan along `axis` with any associative body (Hillis-Steele:
// log2(n) batched runs of the body, each combining every element with the
// partial result `shift` places before it, earlier operand first). Serves
// cumlogsumexp and other scans MLX has no op for in O(n log n), not O(n^2).
Arrays associative_scan(const RegionProgram& body, RunState& st, Arrays xs, int axis,
                        bool reverse) {
  int n = xs[0].shape(axis);
  auto part = [&](const mx::array& x, int start, int stop) {
    mx::Shape lo(x.ndim(), 0), hi = x.shape();
    lo[axis] = start;
    hi[axis] = stop;
    return mx::slice(x, lo, hi);
  };
  for (int shift = 1; shift < n; shift *= 2) {
    Arrays args;
    // Forward: y[i] = body(y[i - shift], y[i]) for i >= shift. Reverse
    // scans run from the end: y[i] = body(y[i + shift], y[i]).
    for (const auto& x : xs) args.push_back(reverse ? part(x, shift, n) : part(x, 0, n - shift));
    for (const auto& x : xs) args.push_back(reverse ? part(x, 0, n - shift) : part(x, shift, n));
    Arrays comb = body.run_batched(st, args);
    for (size_t i = 0; i < xs.size(); ++i) {
      mx::array c = mx::astype(comb[i], xs[i].dtype());
      xs[i] = reverse ? mx::concatenate({c, part(xs[i], n - shift, n)}, axis)
                      : mx::concatenate({part(xs[i], 0, shift), c}, axis);
    }
  }
  return xs;
}

Kernel lower_reduce_window(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  size_t k = ctx.num_out();
  if (k == 0 || ctx.num_in() != 2 * k) ctx.fail("expects 2N operands for N results, got ", ctx.num_in());
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  int64_t rank = in.rank();
  Window w = read_window(ctx, rank);
  // complex128 (f64 pairs, complex128.h) scans through its body; other
  // c128 windows with bodies that are not sums are not supported.
  const bool pairs = in.dtype == DType::kC128;
  auto combiner = k == 1 && !pairs ? match_combiner(inst.regions.at(0), in.dtype) : std::nullopt;
  std::vector<mx::Dtype> dts;
  for (size_t i = 0; i < k; ++i) dts.push_back(to_mlx(ctx.out(i).dtype));

  // Whether padding contributes nothing: every init is a constant that is
  // the recognised body's identity.
  bool identity_init = false;
  if (combiner) {
    auto init_value = ctx.constant_value(inst.operands[1]);
    identity_init = init_value && is_identity(*combiner, *init_value, in.dtype);
  }
  std::shared_ptr<const RegionProgram> body;
  if (!combiner) body = ctx.lower_region(inst.regions.at(0));
  auto cum = cumulative_axis(w, in.shape);
  if (cum && identity_init) {
    auto [axis, reverse] = *cum;
    Combiner c = *combiner;
    bool is_pred = in.dtype == DType::kPred;
    mx::Dtype dt = dts[0];
    const mx::Dtype xt = to_mlx(in.dtype);
    const bool extreme = (c == Combiner::kMax || c == Combiner::kMin) &&
                         mx::issubdtype(xt, mx::floating);
    const bool nan_safe = extreme && mlx_scan_rule_holds(xt);
    return binary([=](const mx::array& x, const mx::array&) {
      mx::array y = is_pred ? mx::astype(x, mx::uint8) : x;
      mx::array r = extreme && mx::issubdtype(y.dtype(), mx::floating)
                        ? cumulative_extreme(c, y, axis, reverse, nan_safe && y.dtype() == xt)
                        : cumulative(c, y, axis, reverse);
      return r.dtype() == dt ? r : mx::astype(r, dt);
    });
  }
  // Scans with other bodies (cumlogsumexp): the padding is init, which JAX
  // sets to the body's identity (-inf for logaddexp); pad elements are
  // skipped below in the general path too, so both agree for any init.
  if (cum && body) {
    auto [axis, reverse] = *cum;
    return [=](RunState& st, const Arrays& args) {
      Arrays xs(args.begin(), args.begin() + k);
      return associative_scan(*body, st, xs, axis, reverse);
    };
  }
  // A window of one element everywhere, unpadded: each result is
  // body(init, x) (JAX's cumprod along an axis of length 1).
  bool single = true;
  for (int64_t d = 0; d < rank; ++d)
    single &= w.dims[d] == 1 && w.strides[d] == 1 && w.base_dil[d] == 1 && w.pad_lo[d] == 0 &&
              w.pad_hi[d] == 0;
  if (single && body) {
    return [=](RunState& st, const Arrays& args) {
      Arrays xs;
      for (size_t i = 0; i < k; ++i) xs.push_back(mx::broadcast_to(args[k + i], args[i].shape()));
      xs.insert(xs.end(), args.begin(), args.begin() + k);
      Arrays r = body->run_batched(st, xs);
      for (size_t i = 0; i < k; ++i)
        if (r[i].dtype() != args[i].dtype()) r[i] = mx::astype(r[i], args[i].dtype());
      return r;
    };
  }
  if (pairs)
    ctx.fail("complex128 windows are supported for sums, for cumulative scans and for windows "
             "of one element with other bodies (cumprod), not for this window");

  // A window as wide as the base dilation, stride 1, padded by one less
  // than the window on both sides: every window holds exactly one element,
  // so the result repeats each element window-many times along such dims.
  // JAX's gradient of a sum pool whose stride is its window (avg_pool) is
  // this, once the frontend folds its pad into the window. One broadcast
  // instead of a padded canvas and a slice per window offset.
  if (combiner && in.num_elements() > 0) {
    bool repeat = true, any = false;
    mx::Shape expanded, tiled;
    for (int64_t d = 0; d < rank && repeat; ++d) {
      int64_t b = w.dims[d];
      bool trivial = b == 1 && w.strides[d] == 1 && w.base_dil[d] == 1 && w.pad_lo[d] == 0 &&
                     w.pad_hi[d] == 0;
      bool rep = b > 1 && w.strides[d] == 1 && w.win_dil[d] == 1 && w.base_dil[d] == b &&
                 w.pad_lo[d] == b - 1 && w.pad_hi[d] == b - 1 && out.shape[d] == in.shape[d] * b;
      repeat = trivial || rep;
      any |= rep;
      expanded.push_back(static_cast<int32_t>(in.shape[d]));
      tiled.push_back(static_cast<int32_t>(in.shape[d]));
      if (rep) {
        expanded.push_back(1);
        tiled.push_back(static_cast<int32_t>(b));
      }
    }
    if (repeat && any) {
      Combiner c = *combiner;
      DType t = in.dtype;
      mx::Dtype dt = dts[0];
      mx::Shape out_shape = to_mlx_shape(out.shape);
      return binary([=](const mx::array& x, const mx::array& init) {
        mx::array y = mx::reshape(mx::broadcast_to(mx::reshape(x, expanded), tiled), out_shape);
        mx::array r = combine(c, mx::broadcast_to(init, out_shape), y, t);
        return r.dtype() == dt ? r : mx::astype(r, dt);
      });
    }
  }

  // General path: pad (edges + base dilation), then combine strided slices.
  // Negative padding crops the (dilated) input after the positive padding.
  mx::Shape spread(rank), padded(rank), place_start(rank), place_stop(rank), place_step(rank);
  mx::Shape crop_lo(rank), crop_hi(rank);
  bool needs_pad = false, needs_crop = false;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = in.shape[d];
    int64_t s = n == 0 ? 0 : (n - 1) * w.base_dil[d] + 1;
    int64_t lo = std::max<int64_t>(w.pad_lo[d], 0), hi = std::max<int64_t>(w.pad_hi[d], 0);
    int64_t p = s + lo + hi;
    padded[d] = static_cast<int32_t>(p);
    place_start[d] = static_cast<int32_t>(lo);
    place_stop[d] = static_cast<int32_t>(lo + s);
    place_step[d] = static_cast<int32_t>(w.base_dil[d]);
    crop_lo[d] = static_cast<int32_t>(std::max<int64_t>(-w.pad_lo[d], 0));
    crop_hi[d] = static_cast<int32_t>(std::max<int64_t>(p + std::min<int64_t>(w.pad_hi[d], 0), crop_lo[d]));
    needs_pad |= p != n;
    needs_crop |= crop_lo[d] != 0 || crop_hi[d] != p;
  }
  // One slice per window offset.
  int64_t offsets = 1;
  for (int64_t d = 0; d < rank; ++d) offsets *= w.dims[d];
  if (offsets > 4096)
    ctx.fail("windows of ", offsets, " elements are not supported outside the cumulative fast path");
  std::vector<std::pair<mx::Shape, mx::Shape>> slices;  // (start, stop); strides shared
  mx::Shape strides = to_shape(w.strides);
  for (int64_t o = 0; o < offsets; ++o) {
    mx::Shape start(rank), stop(rank);
    int64_t rem = o;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t i = rem % w.dims[d];
      rem /= w.dims[d];
      int64_t s0 = i * w.win_dil[d];
      start[d] = static_cast<int32_t>(s0);
      stop[d] = static_cast<int32_t>(out.shape[d] == 0 ? s0 : s0 + (out.shape[d] - 1) * w.strides[d] + 1);
    }
    slices.emplace_back(start, stop);
  }
  mx::Shape out_shape = to_mlx_shape(out.shape);
  bool use_mask = needs_pad && !identity_init;
  bool empty = out.num_elements() == 0;
  bool empty_in = in.num_elements() == 0;
  std::optional<Combiner> c = combiner;
  DType t = in.dtype;
  return [=](RunState& st, const Arrays& args) {
    Arrays inits(args.begin() + k, args.end());
    Arrays acc;
    for (size_t i = 0; i < k; ++i) acc.push_back(mx::broadcast_to(inits[i], out_shape));
    if (empty) return acc;
    auto prepare = [&](const mx::array& x, const mx::array& fill) {
      mx::array base = x;
      if (needs_pad) {
        mx::array canvas = mx::broadcast_to(fill, padded);
        base = empty_in ? canvas : mx::slice_update(canvas, x, place_start, place_stop, place_step);
      }
      return needs_crop ? mx::slice(base, crop_lo, crop_hi) : base;
    };
    Arrays bases;
    for (size_t i = 0; i < k; ++i) bases.push_back(prepare(args[i], inits[i]));
    std::optional<mx::array> mask;
    if (use_mask)
      mask = prepare(mx::ones(to_mlx_shape(in.shape), mx::bool_), mx::array(false));
    for (const auto& [start, stop] : slices) {
      Arrays s;
      for (const auto& b : bases) s.push_back(mx::slice(b, start, stop, strides));
      Arrays next;
      if (c) {
        next = {combine(*c, acc[0], s[0], t)};
      } else {
        Arrays bargs = acc;
        bargs.insert(bargs.end(), s.begin(), s.end());
        next = body->run_batched(st, bargs);
      }
      std::optional<mx::array> keep;
      if (mask) keep = mx::slice(*mask, start, stop, strides);
      for (size_t i = 0; i < k; ++i) {
        mx::array v = mx::astype(mx::broadcast_to(next[i], out_shape), dts[i]);
        acc[i] = keep ? mx::where(*keep, v, acc[i]) : v;
      }
    }
    return acc;
  };
}

}  // namespace

void register_reduce_window_ops(Registry& r) {
  r.add(compiler::Opcode::reduce_window, lower_reduce_window);
}

}  // namespace pjrtx::backend
