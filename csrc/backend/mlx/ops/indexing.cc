// Indexing ops: dynamic_slice, dynamic_update_slice, gather, scatter.
// StableHLO clamps the start indices of dynamic_slice, dynamic_update_slice
// and gather to [0, dim - size]; XLA drops a scatter window that does not fit
// entirely. MLX has no bounds checks at all (an out-of-range index reads
// garbage or crashes), so the clamping and dropping happen here.
#include "backend/mlx/ops/indexing.h"
#include "backend/mlx/ops/scatter_in_place.h"

#include "backend/mlx/host/host_int.h"
#include "backend/mlx/host/host_small.h"
#include "backend/mlx/loops/host_fold.h"

#include <algorithm>
#include <complex>
#include <cstdint>
#include <numeric>
#include <optional>

namespace pjrtx::backend {

namespace ops {

using host_int::clamp_index_value;
using host_int::type_max;

namespace {
// clamp_index on the host, for indices already computed there (a loop's
// bookkeeping, host/host_small.h): no nodes. `shape`: the result's shape (the
// index's own when null).
std::optional<mx::array> clamp_on_host(const mx::array& idx, DType t, int64_t hi,
                                       const mx::Shape* shape = nullptr) {
  auto v = computed_ints(idx);
  if (!v) return std::nullopt;
  std::vector<int32_t> out(v->size());
  for (size_t i = 0; i < v->size(); ++i) out[i] = clamp_index_value((*v)[i], t, hi);
  return mx::array(out.begin(), shape != nullptr ? *shape : idx.shape(), mx::int32);
}
}  // namespace

mx::array clamp_index(const mx::array& idx, DType t, int64_t hi) {
  mx::Dtype dt = idx.dtype();
  hi = std::max<int64_t>(hi, 0);
  if (auto h = clamp_on_host(idx, t, hi)) return *h;
  mx::array x = idx;
  if (hi <= type_max(t)) x = mx::minimum(x, mx::array(hi, dt));
  if (compiler::is_signed_int(t)) x = mx::maximum(x, mx::array(0, dt));
  return mx::astype(x, mx::int32);
}

mx::array index_in_range(const mx::array& idx, DType t, int64_t hi) {
  mx::Dtype dt = idx.dtype();
  if (hi < 0) return mx::zeros(idx.shape(), mx::bool_);
  // Signed: 0 <= idx <= hi is one unsigned compare (a negative index wraps
  // past every hi). One compare fuses where two would not: MLX's compile
  // merges our idx >= 0 with the same compare in JAX's own bounds mask
  // (take_along_axis), and a node with two readers is a kernel of its own.
  if (compiler::is_signed_int(t)) {
    // (hi past the type's max: every non-negative index is in range.)
    mx::Dtype ut = unsigned_of_width(compiler::dtype_bits(t));
    return mx::less_equal(mx::astype(idx, ut), mx::array(std::min(hi, type_max(t)), ut));
  }
  return hi <= type_max(t) ? mx::less_equal(idx, mx::array(hi, dt))
                           : mx::full(idx.shape(), true, mx::bool_);
}

}  // namespace ops

namespace {

using namespace ops;

// ---- dynamic_slice / dynamic_update_slice -----------------------------------

// Start indices that are constants in the plan (a KV cache written at
// (0, pos, 0)) are clamped at compile time; only the others reach MLX as an
// index array, so a slice with no runtime start is a plain static slice and
// one with a single runtime start needs no concatenation.
struct StartPlan {
  mx::Shape fixed;            // per dim: the clamped constant start (0 where dynamic)
  std::vector<int> dynamic;   // dims whose start is known only at run time

  // The start array and axes for MLX's dynamic slice / slice_update: the
  // runtime starts, clamped, and the constant ones that are not 0.
  std::pair<mx::array, std::vector<int>> start_array(const Arrays& args, size_t first, DType it,
                                                     const std::vector<int64_t>& hi) const {
    std::vector<mx::array> parts;
    std::vector<int> axes;
    for (int d = 0; d < static_cast<int>(fixed.size()); ++d) {
      bool dyn = std::find(dynamic.begin(), dynamic.end(), d) != dynamic.end();
      if (dyn) {
        // Traced (a segment, a loop block): broadcast to one element before
        // the clamp, which fuses into the clamp's kernel, where a reshape
        // after it would be one more node per index per run. Eager: the
        // clamp, then a reshape (one node either way).
        const mx::Shape one{1};
        auto h = clamp_on_host(args[first + d], it, std::max<int64_t>(hi[d], 0), &one);
        if (!h) h = host_clamped_start(args[first + d], hi[d]);
        if (h)
          parts.push_back(*h);
        else if (tracing_segment())
          parts.push_back(clamp_index(mx::broadcast_to(args[first + d], one), it, hi[d]));
        else
          parts.push_back(mx::reshape(clamp_index(args[first + d], it, hi[d]), one));
      } else if (fixed[d] != 0) {
        parts.push_back(mx::array({fixed[d]}, mx::int32));
      } else {
        continue;
      }
      axes.push_back(d);
    }
    return {parts.size() == 1 ? parts[0] : mx::concatenate(parts, 0), axes};
  }
};

StartPlan plan_starts(LowerCtx& ctx, size_t first, const std::vector<int64_t>& hi, DType it) {
  StartPlan sp;
  for (size_t d = 0; d < hi.size(); ++d) {
    auto c = first + d < ctx.num_in() ? ctx.constant_value(ctx.inst().operands[first + d])
                                      : std::nullopt;
    if (!c || c->size() != 1) {
      sp.fixed.push_back(0);
      sp.dynamic.push_back(static_cast<int>(d));
      continue;
    }
    mx::array v = clamp_index(mx::reshape(*c, {}), it, hi[d]);
    v.eval();
    sp.fixed.push_back(v.item<int32_t>());
  }
  return sp;
}


Kernel lower_dynamic_slice(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  auto sizes = ctx.inst().attr_ints("slice_sizes");
  if (static_cast<int64_t>(sizes.size()) != in.rank() ||
      static_cast<int64_t>(ctx.num_in()) != in.rank() + 1)
    ctx.fail("expects one start index and one slice size per dim of ", in.str());
  std::vector<int64_t> hi(in.rank());
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (sizes[d] < 0 || sizes[d] > in.shape[d])
      ctx.fail("slice size ", sizes[d], " does not fit dim ", d, " of ", in.str());
    hi[d] = in.shape[d] - sizes[d];
  }
  DType it = ctx.num_in() > 1 ? ctx.in(1).dtype : DType::kS32;
  mx::Shape out_shape = to_shape(sizes);
  int64_t out_elems = ctx.out(0).num_elements();
  mx::Dtype odt = to_mlx(ctx.out(0).dtype);
  std::vector<int> axes(in.rank());
  std::iota(axes.begin(), axes.end(), 0);
  StartPlan sp = plan_starts(ctx, 1, hi, it);
  return nary([=](const Arrays& args) {
    if (axes.empty()) return args[0];
    if (out_elems == 0) return mx::zeros(out_shape, odt);
    if (sp.dynamic.empty()) {
      mx::Shape stop = sp.fixed;
      for (size_t d = 0; d < stop.size(); ++d) stop[d] += out_shape[d];
      return mx::slice(args[0], sp.fixed, stop);
    }
    auto [start, start_axes] = sp.start_array(args, 1, it, hi);
    return mx::slice(args[0], start, start_axes, out_shape);
  });
}

Kernel lower_dynamic_update_slice(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  const auto& upd = ctx.in(1);
  if (upd.rank() != in.rank() || static_cast<int64_t>(ctx.num_in()) != in.rank() + 2)
    ctx.fail("expects an update of the operand's rank and one start index per dim");
  std::vector<int64_t> hi(in.rank());
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (upd.shape[d] > in.shape[d])
      ctx.fail("update ", upd.str(), " does not fit in ", in.str());
    hi[d] = in.shape[d] - upd.shape[d];
  }
  DType it = ctx.num_in() > 2 ? ctx.in(2).dtype : DType::kS32;
  bool empty = upd.num_elements() == 0;
  std::vector<int> axes(in.rank());
  std::iota(axes.begin(), axes.end(), 0);
  StartPlan sp = plan_starts(ctx, 2, hi, it);
  return nary([=](const Arrays& args) {
    if (empty) return args[0];
    if (axes.empty()) return args[1];
    if (sp.dynamic.empty()) {
      mx::Shape stop = sp.fixed;
      for (size_t d = 0; d < stop.size(); ++d) stop[d] += args[1].shape(static_cast<int>(d));
      return mx::slice_update(args[0], args[1], sp.fixed, stop);
    }
    auto [start, start_axes] = sp.start_array(args, 2, it, hi);
    return mx::slice_update(args[0], args[1], start, start_axes);
  });
}

// ---- shared gather/scatter index preparation ---------------------------------

// The index arrays MLX's gather/scatter take, one per operand axis in `axes`,
// each of the batch shape (start_indices without index_vector_dim).
struct IndexPlan {
  int64_t index_vector_dim;
  int64_t indices_rank;
  std::vector<int64_t> index_map;       // operand dim of each index component
  std::vector<int64_t> batching_operand;  // operand batching dims
  std::vector<int64_t> batching_indices;  // their dims in start_indices
  std::vector<int> axes;                // MLX axes: index_map then batching_operand
  std::vector<int64_t> batch_shape;     // start_indices shape without index_vector_dim
  DType index_type;
};

IndexPlan plan_indices(LowerCtx& ctx, const compiler::TensorType& indices,
                       int64_t index_vector_dim, std::vector<int64_t> index_map,
                       std::vector<int64_t> batching_operand,
                       std::vector<int64_t> batching_indices) {
  IndexPlan p;
  p.index_vector_dim = index_vector_dim;
  p.indices_rank = indices.rank();
  p.index_map = std::move(index_map);
  p.batching_operand = std::move(batching_operand);
  p.batching_indices = std::move(batching_indices);
  p.index_type = indices.dtype;
  if (!compiler::is_integer(indices.dtype)) ctx.fail("indices must be integers, got ", indices.str());
  int64_t n_components = index_vector_dim < indices.rank() ? indices.shape[index_vector_dim] : 1;
  if (n_components != static_cast<int64_t>(p.index_map.size()))
    ctx.fail("index vector has ", n_components, " components for ", p.index_map.size(),
             " mapped dims");
  for (int64_t d = 0; d < indices.rank(); ++d)
    if (d != index_vector_dim) p.batch_shape.push_back(indices.shape[d]);
  for (int64_t d : p.index_map) p.axes.push_back(static_cast<int>(d));
  for (int64_t d : p.batching_operand) p.axes.push_back(static_cast<int>(d));
  return p;
}

// Position of start_indices dim `d` among the batch dims.
int64_t batch_pos(const IndexPlan& p, int64_t d) {
  return d < p.index_vector_dim ? d : d - 1;
}

// The raw index component k (shape batch_shape), in the index type.
mx::array component(const IndexPlan& p, const mx::array& indices, int64_t k) {
  if (p.index_vector_dim >= p.indices_rank) return indices;  // implicit trailing 1
  if (auto v = computed_ints(indices); v && indices.dtype() == mx::int32) {
    // Indices the host computed (a loop's bookkeeping, host/host_small.h): the
    // component on the host too, no nodes.
    const mx::Shape& sh = indices.shape();
    int64_t inner = 1;
    for (int64_t d = p.index_vector_dim + 1; d < p.indices_rank; ++d) inner *= sh[d];
    const int64_t n = sh[p.index_vector_dim];
    std::vector<int32_t> out;
    for (size_t i = 0; i < v->size(); ++i)
      if ((static_cast<int64_t>(i) / inner) % n == k) out.push_back(static_cast<int32_t>((*v)[i]));
    mx::Shape shape = sh;
    shape.erase(shape.begin() + p.index_vector_dim);
    return mx::array(out.begin(), shape, mx::int32);
  }
  mx::Shape start(p.indices_rank, 0), stop(indices.shape().begin(), indices.shape().end());
  start[p.index_vector_dim] = static_cast<int32_t>(k);
  stop[p.index_vector_dim] = static_cast<int32_t>(k + 1);
  return mx::squeeze(mx::slice(indices, start, stop), p.index_vector_dim);
}

// iota over batch dim `pos`, broadcast to the batch shape (int32). Small
// ones are written on the host, no nodes (a vmapped gather in a loop body
// built an arange, a reshape and a broadcast per iteration).
mx::array batch_iota(const IndexPlan& p, int64_t pos) {
  int64_t total = 1;
  for (int64_t d : p.batch_shape) total *= d;
  if (total <= 4096) {
    std::vector<int32_t> v(static_cast<size_t>(total));
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(pos) + 1; d < p.batch_shape.size(); ++d) inner *= p.batch_shape[d];
    for (int64_t i = 0; i < total; ++i) v[i] = static_cast<int32_t>((i / inner) % p.batch_shape[pos]);
    return mx::array(v.begin(), to_shape(p.batch_shape), mx::int32);
  }
  mx::Shape shape(p.batch_shape.size(), 1);
  shape[pos] = static_cast<int32_t>(p.batch_shape[pos]);
  mx::array a = mx::reshape(mx::arange(0, static_cast<int>(p.batch_shape[pos]), 1), shape);
  return mx::broadcast_to(a, to_shape(p.batch_shape));
}

// JAX's take_along_axis (and its gradient's scatter-add) index one operand
// dim `axis` with one index per element and make every other operand dim a
// batching dim, in order: batch dim r of start_indices is operand dim r.
// MLX does that in one GatherAxis / ScatterAxis, with no iotas, concatenation
// or transposes. Returns the axis, or nothing for any other form.
std::optional<int> along_axis(const IndexPlan& p, int64_t operand_rank,
                              const std::vector<int64_t>& collapsed_or_inserted,
                              const std::vector<int64_t>& offset_or_window_dims) {
  if (p.index_map.size() != 1 || !offset_or_window_dims.empty()) return std::nullopt;
  int64_t axis = p.index_map[0];
  if (collapsed_or_inserted != std::vector<int64_t>{axis}) return std::nullopt;
  if (static_cast<int64_t>(p.batch_shape.size()) != operand_rank ||
      static_cast<int64_t>(p.batching_operand.size()) != operand_rank - 1)
    return std::nullopt;
  for (size_t i = 0; i < p.batching_operand.size(); ++i)
    if (p.batching_operand[i] == axis || batch_pos(p, p.batching_indices[i]) != p.batching_operand[i])
      return std::nullopt;
  return static_cast<int>(axis);
}

// The single index component, shaped as the batch (a reshape: the index
// vector dim, if present, has size 1).
mx::array only_component(const IndexPlan& p, const mx::array& indices) {
  return reshape_if_needed(indices, to_shape(p.batch_shape));
}

// x + (-0) == x for every x, -0 and NaN included (0 for integers). -0 is
// the negation of +0 at run time: a fused kernel reads a -0 constant as +0.
mx::array add_identity(mx::Dtype dt) {
  if (mx::issubdtype(dt, mx::complexfloating))
    return mx::negative(mx::array(std::complex<float>(0.0f, 0.0f), dt));
  if (mx::issubdtype(dt, mx::floating)) return mx::negative(mx::array(0.0f, dt));
  return mx::array(0, dt);
}

// ---- gather -----------------------------------------------------------------

Kernel lower_gather(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  const auto& operand = ctx.in(0);
  const auto& out = ctx.out(0);
  const std::string k = "dimension_numbers.";
  auto offset_dims = inst.attr_ints(k + "offset_dims", {});
  auto collapsed = inst.attr_ints(k + "collapsed_slice_dims", {});
  auto slice_sizes = inst.attr_ints("slice_sizes");
  IndexPlan p = plan_indices(ctx, ctx.in(1), inst.attr_int(k + "index_vector_dim"),
                             inst.attr_ints(k + "start_index_map", {}),
                             inst.attr_ints(k + "operand_batching_dims", {}),
                             inst.attr_ints(k + "start_indices_batching_dims", {}));
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank())
    ctx.fail("slice_sizes has ", slice_sizes.size(), " entries for ", operand.str());
  std::vector<int64_t> hi(operand.rank());
  for (int64_t d = 0; d < operand.rank(); ++d) {
    if (slice_sizes[d] > operand.shape[d])
      ctx.fail("slice size ", slice_sizes[d], " exceeds dim ", d, " of ", operand.str());
    hi[d] = operand.shape[d] - slice_sizes[d];
  }
  // Dims of the gathered slice that disappear from the result.
  std::vector<int> squeeze;
  for (int64_t d = 0; d < operand.rank(); ++d)
    if (std::count(collapsed.begin(), collapsed.end(), d) ||
        std::count(p.batching_operand.begin(), p.batching_operand.end(), d))
      squeeze.push_back(static_cast<int>(p.batch_shape.size() + d));
  // MLX returns [batch..., offset...]; StableHLO puts offset dims at
  // offset_dims and batch dims, in order, everywhere else.
  std::vector<int> perm;
  int64_t nb = static_cast<int64_t>(p.batch_shape.size());
  for (int64_t r = 0, b = 0; r < out.rank(); ++r) {
    auto it = std::find(offset_dims.begin(), offset_dims.end(), r);
    perm.push_back(it != offset_dims.end() ? static_cast<int>(nb + (it - offset_dims.begin()))
                                           : static_cast<int>(b++));
  }
  bool identity_perm = std::is_sorted(perm.begin(), perm.end());
  mx::Shape mlx_slice = to_shape(slice_sizes);
  mx::Shape out_shape = to_mlx_shape(out.shape);
  mx::Dtype odt = to_mlx(out.dtype);
  bool empty = out.num_elements() == 0;
  bool unit_slices = std::all_of(slice_sizes.begin(), slice_sizes.end(), [](int64_t s) { return s == 1; });
  if (auto axis = unit_slices ? along_axis(p, operand.rank(), collapsed, offset_dims) : std::nullopt;
      axis && !empty) {
    int64_t top = operand.shape[*axis] - 1;
    return binary([=](const mx::array& a, const mx::array& indices) {
      mx::array i = clamp_index(only_component(p, indices), p.index_type, top);
      return mx::take_along_axis(a, i, *axis);
    });
  }
  return binary([=](const mx::array& a, const mx::array& indices) {
    if (empty) return mx::zeros(out_shape, odt);
    std::vector<mx::array> idx;
    for (size_t c = 0; c < p.index_map.size(); ++c)
      idx.push_back(clamp_index(component(p, indices, c), p.index_type, hi[p.index_map[c]]));
    for (int64_t d : p.batching_indices) idx.push_back(batch_iota(p, batch_pos(p, d)));
    mx::array g = [&] {
      if (idx.empty()) {
        // No indexed dim: every batch element reads the same leading slice.
        mx::array s = mx::slice(a, mx::Shape(a.ndim(), 0), mlx_slice);
        mx::Shape full = to_shape(p.batch_shape);
        full.insert(full.end(), mlx_slice.begin(), mlx_slice.end());
        mx::Shape ones(p.batch_shape.size(), 1);
        ones.insert(ones.end(), mlx_slice.begin(), mlx_slice.end());
        return mx::broadcast_to(mx::reshape(s, ones), full);
      }
      return mx::gather(a, idx, p.axes, mlx_slice);
    }();
    if (!squeeze.empty()) g = mx::squeeze(g, squeeze);
    if (!identity_perm) g = mx::transpose(g, perm);
    return mx::reshape(g, out_shape);
  });
}

// ---- scatter ----------------------------------------------------------------

enum class ScatterKind { kSet, kAdd, kSub, kMul, kMax, kMin };

std::optional<ScatterKind> match_scatter_body(const compiler::Region& body, DType t) {
  if (body.params.size() != 2 || body.returns.size() != 1) return std::nullopt;
  if (body.body.empty() && body.returns[0] == body.params[1]) return ScatterKind::kSet;
  if (body.body.size() != 1) return std::nullopt;
  const auto& inst = body.body[0];
  if (inst.results.size() != 1 || inst.results[0] != body.returns[0] || inst.operands.size() != 2)
    return std::nullopt;
  auto a = inst.operands[0], b = inst.operands[1];
  bool in_order = a == body.params[0] && b == body.params[1];
  if (!(in_order || (a == body.params[1] && b == body.params[0]))) return std::nullopt;
  bool pred = t == DType::kPred;
  switch (inst.op) {
    case compiler::Opcode::add: return pred ? ScatterKind::kMax : ScatterKind::kAdd;
    // x - u1 - u2 = x - (u1 + u2): a scatter_add of negated updates.
    case compiler::Opcode::subtract:
      if (in_order && !pred && !compiler::is_complex(t)) return ScatterKind::kSub;
      return std::nullopt;
    case compiler::Opcode::multiply: return pred ? ScatterKind::kMin : ScatterKind::kMul;
    case compiler::Opcode::maximum: case compiler::Opcode::or_: return ScatterKind::kMax;
    case compiler::Opcode::minimum: case compiler::Opcode::and_: return ScatterKind::kMin;
    default: return std::nullopt;
  }
}

// Any other update body, and scatters of several operands at once: element
// by element, in XLA:CPU's order (update elements in row-major order).
// Every update element's flat operand position is computed; the elements
// that hit one position are applied in rounds (round r applies each
// element that is the r-th to hit its position: a gather, one batched run
// of the body and a scatter to distinct positions). The number of rounds,
// the largest multiplicity, is read at run time.
// `pairs`: the operands and updates are complex128, stored as f64 pairs
// (complex128.h), which stay together as a trailing dim of 2.
Arrays scatter_rounds(const RegionProgram& body, RunState& st, const Arrays& operands,
                      const Arrays& updates, const mx::array& target, int64_t total,
                      const mx::Shape& operand_shape, bool pairs = false) {
  size_t k = operands.size();
  mx::array tgt = mx::flatten(target);
  int n = tgt.size();
  mx::array order = mx::argsort(tgt);  // stable: equal positions keep update order
  mx::array sorted = mx::take(tgt, order);
  mx::array pos = mx::arange(n, mx::int32);
  mx::array first = mx::concatenate(
      {mx::array({true}), mx::not_equal(mx::slice(sorted, {1}, {n}), mx::slice(sorted, {0}, {n - 1}))});
  mx::array run_start = mx::cummax(mx::where(first, pos, mx::zeros_like(pos)), 0);
  mx::array rank = mx::take(mx::subtract(pos, run_start), mx::argsort(order));
  mx::array dropped = mx::equal(tgt, mx::array(static_cast<int>(total), mx::int32));
  rank = mx::where(dropped, mx::zeros_like(rank), rank);
  mx::array most = mx::max(rank);
  most.eval();
  int rounds = most.item<int>() + 1;
  const int tot = static_cast<int>(total);
  auto rows = [&](int m) { return pairs ? mx::Shape{m, 2} : mx::Shape{m}; };
  Arrays cur, upd;
  for (size_t i = 0; i < k; ++i) {
    cur.push_back(mx::concatenate({mx::reshape(operands[i], rows(tot)), mx::zeros(rows(1), operands[i].dtype())}, 0));
    upd.push_back(mx::reshape(updates[i], rows(n)));
  }
  mx::array trash = mx::full({n}, tot, mx::int32);
  mx::Shape vshape = pairs ? mx::Shape{n, 1, 2} : mx::Shape{n, 1};
  for (int r = 0; r < rounds; ++r) {
    mx::array t = rounds == 1 ? tgt : mx::where(mx::equal(rank, mx::array(r, mx::int32)), tgt, trash);
    Arrays args;
    for (const auto& c : cur) args.push_back(mx::take(c, t, 0));
    args.insert(args.end(), upd.begin(), upd.end());
    Arrays res = body.run_batched(st, args);
    for (size_t i = 0; i < k; ++i) {
      mx::array v = mx::astype(mx::broadcast_to(res[i], rows(n)), cur[i].dtype());
      cur[i] = mx::scatter(cur[i], {t}, mx::reshape(v, vshape), std::vector<int>{0});
    }
  }
  mx::Shape out_shape = operand_shape;
  if (pairs) out_shape.push_back(2);
  Arrays out;
  for (const auto& c : cur)
    out.push_back(mx::reshape(mx::slice(c, mx::Shape(c.ndim(), 0), rows(tot)), out_shape));
  return out;
}

Kernel lower_scatter(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  size_t k = ctx.num_out();
  if (k == 0 || ctx.num_in() != 2 * k + 1)
    ctx.fail("expects 2N+1 operands for N results, got ", ctx.num_in());
  const auto& operand = ctx.in(0);
  const auto& updates = ctx.in(k + 1);
  const std::string attr = "scatter_dimension_numbers.";
  auto window_dims = inst.attr_ints(attr + "update_window_dims", {});
  auto inserted = inst.attr_ints(attr + "inserted_window_dims", {});
  IndexPlan p = plan_indices(ctx, ctx.in(k), inst.attr_int(attr + "index_vector_dim"),
                             inst.attr_ints(attr + "scattered_dims_to_operand_dims", {}),
                             inst.attr_ints(attr + "input_batching_dims", {}),
                             inst.attr_ints(attr + "scatter_indices_batching_dims", {}));
  // complex128 (f64 pairs, complex128.h) with a body that is not a sum or
  // a replacement (a product): element by element through the body.
  const bool pairs = operand.dtype == DType::kC128;
  if (pairs)
    for (size_t i = 0; i < ctx.num_in(); ++i)
      if (i != k && ctx.in(i).dtype != DType::kC128)
        ctx.fail("a scatter of complex128 with other types is not supported: ", ctx.in(i).str());
  // Without scattered or batching dims every update window starts at the
  // origin: MLX's scatter needs an indexed axis, the element path does not.
  auto kind = k == 1 && !p.axes.empty() && !pairs
                  ? match_scatter_body(inst.regions.at(0), operand.dtype)
                  : std::nullopt;
  std::shared_ptr<const RegionProgram> body;
  if (!kind) body = ctx.lower_region(inst.regions.at(0));
  // Updates: [scatter dims..., window dims...] -> insert size-1 dims for
  // inserted/batching operand dims -> [batch..., full operand-rank window].
  std::vector<int> upd_perm;
  for (int64_t d = 0; d < updates.rank(); ++d)
    if (!std::count(window_dims.begin(), window_dims.end(), d)) upd_perm.push_back(static_cast<int>(d));
  for (int64_t d : window_dims) upd_perm.push_back(static_cast<int>(d));
  if (pairs) upd_perm.push_back(static_cast<int>(updates.rank()));
  mx::Shape full_window;
  std::vector<int64_t> window(operand.rank(), 1);
  for (int64_t d = 0, w = 0; d < operand.rank(); ++d) {
    bool dropped = std::count(inserted.begin(), inserted.end(), d) ||
                   std::count(p.batching_operand.begin(), p.batching_operand.end(), d);
    if (!dropped) {
      if (w >= static_cast<int64_t>(window_dims.size())) ctx.fail("update window has too few dims");
      window[d] = updates.shape[window_dims[w++]];
    }
    full_window.push_back(static_cast<int32_t>(window[d]));
  }
  mx::Shape upd_shape = to_shape(p.batch_shape);
  upd_shape.insert(upd_shape.end(), full_window.begin(), full_window.end());
  std::vector<int64_t> hi(operand.rank());
  for (int64_t d = 0; d < operand.rank(); ++d) hi[d] = operand.shape[d] - window[d];
  // Windows that do not fit are dropped (XLA): they are redirected into a
  // scratch block appended to the first indexed axis, then sliced away.
  int pad_axis = p.axes.empty() ? -1 : p.axes.front();
  int64_t pad_size = pad_axis >= 0 ? window[pad_axis] : 0;
  mx::Shape operand_shape = to_mlx_shape(operand.shape);
  int64_t total = operand.num_elements();
  int nb = static_cast<int>(p.batch_shape.size());
  bool empty = updates.num_elements() == 0 || total == 0;
  // A scatter-add along one axis (take_along_axis's gradient): windows that
  // do not fit are dropped by adding the identity at a clamped index.
  std::optional<int> axis;
  if (kind == ScatterKind::kAdd || kind == ScatterKind::kSub)
    axis = along_axis(p, operand.rank(), inserted, window_dims);
  if (axis && !empty) {
    int64_t top = operand.shape[*axis] - 1;
    bool negate = kind == ScatterKind::kSub;
    return [=](RunState&, const Arrays& args) {
      mx::array raw = only_component(p, args[1]);
      mx::array u = negate ? mx::negative(args[2]) : args[2];
      u = mx::where(index_in_range(raw, p.index_type, top), u, add_identity(u.dtype()));
      return Arrays{mx::scatter_add_axis(args[0], clamp_index(raw, p.index_type, top), u, *axis)};
    };
  }
  // How a window that does not fit is dropped without padding the operand:
  // with one window, by writing back what it covers (exact for set, max and
  // min: nothing else can write there); with any number of windows, by
  // adding -0 or multiplying by 1 (exact for every value, NaN and -0
  // included). Other cases pad (below).
  enum class InPlace { kNo, kOwnWindow, kIdentity };
  InPlace in_place = InPlace::kNo;
  int64_t windows = 1;
  for (int64_t b : p.batch_shape) windows *= b;
  if (kind && (*kind == ScatterKind::kAdd || *kind == ScatterKind::kSub ||
               *kind == ScatterKind::kMul))
    in_place = InPlace::kIdentity;
  else if (kind && windows == 1)
    in_place = InPlace::kOwnWindow;
  // On MLX's CPU device a "set" scatter writes into its operand's storage
  // (scatter_in_place.h): a buffer updated at a traced index in a loop is
  // not copied every step.
  std::shared_ptr<const ScatterLayout> set_layout;
  if (kind == ScatterKind::kSet && !empty && !p.index_map.empty()) {
    auto l = std::make_shared<ScatterLayout>();
    l->operand_shape = operand.shape;
    l->window = window;
    l->index_shape = ctx.in(k).shape;
    l->index_vector_dim = p.index_vector_dim;
    l->index_map = p.index_map;
    l->batching_operand = p.batching_operand;
    l->batching_indices = p.batching_indices;
    l->update_shape = updates.shape;
    l->update_window_dims = window_dims;
    for (int64_t d = 0; d < operand.rank(); ++d)
      if (!std::count(inserted.begin(), inserted.end(), d) &&
          !std::count(p.batching_operand.begin(), p.batching_operand.end(), d))
        l->window_operand_dims.push_back(d);
    if (l->window_operand_dims.size() == window_dims.size()) set_layout = std::move(l);
  }
  return [=](RunState& st, const Arrays& args) {
    Arrays operands(args.begin(), args.begin() + k);
    if (empty) return operands;
    if (set_layout && mx::default_device().type == mx::Device::DeviceType::cpu &&
        args[0].dtype() == args[k + 1].dtype() &&
        to_shape(set_layout->operand_shape) == args[0].shape())
      return Arrays{scatter_set_in_place(args[0], args[k], args[k + 1], set_layout)};
    const mx::array& indices = args[k];
    Arrays us;
    mx::Shape us_shape = upd_shape;
    if (pairs) us_shape.push_back(2);
    for (size_t i = 0; i < k; ++i)
      us.push_back(mx::reshape(transpose_if_needed(args[k + 1 + i], upd_perm), us_shape));
    std::vector<mx::array> idx;
    mx::array valid = mx::full(to_shape(p.batch_shape), true, mx::bool_);
    for (size_t c = 0; c < p.index_map.size(); ++c) {
      mx::array raw = component(p, indices, c);
      valid = mx::logical_and(valid, index_in_range(raw, p.index_type, hi[p.index_map[c]]));
      idx.push_back(clamp_index(raw, p.index_type, hi[p.index_map[c]]));
    }
    for (int64_t d : p.batching_indices) idx.push_back(batch_iota(p, batch_pos(p, d)));
    if (body) {
      // Flat operand position of every update element: window start (the
      // index, or 0 for a dim no index names) + window offset, per dim.
      mx::Shape bshape = to_shape(p.batch_shape);
      bshape.insert(bshape.end(), operand_shape.size(), 1);
      mx::array target = mx::zeros({}, mx::int32);
      int64_t stride = total;
      for (size_t d = 0; d < operand_shape.size(); ++d) {
        stride /= operand_shape[d];
        mx::Shape ishape(upd_shape.size(), 1);
        ishape[nb + d] = full_window[d];
        mx::array coord = mx::reshape(mx::arange(full_window[d], mx::int32), ishape);
        auto it = std::find(p.axes.begin(), p.axes.end(), static_cast<int>(d));
        if (it != p.axes.end()) coord = mx::add(coord, mx::reshape(idx[it - p.axes.begin()], bshape));
        target = mx::add(target, mx::multiply(coord, mx::array(static_cast<int>(stride), mx::int32)));
      }
      target = mx::where(mx::reshape(valid, bshape), target, mx::array(static_cast<int>(total), mx::int32));
      return scatter_rounds(*body, st, operands, us, mx::broadcast_to(target, upd_shape), total,
                            operand_shape, pairs);
    }
    const mx::array& a = operands[0];
    mx::array u = us[0];
    mx::array base = a;
    // MLX's scatter max/min keep the update where the operand is NaN;
    // XLA's propagate it: such an element gets its own NaN as update.
    std::optional<mx::array> old;
    auto covered = [&] {
      if (!old) old = mx::gather(a, idx, p.axes, full_window);
      return *old;
    };
    if ((*kind == ScatterKind::kMax || *kind == ScatterKind::kMin) &&
        mx::issubdtype(a.dtype(), mx::floating) && !p.index_map.empty())
      u = mx::where(mx::isnan(covered()), covered(), u);
    if (in_place != InPlace::kNo && !p.index_map.empty()) {
      // No padded copy of the operand (an in-place update of a carried
      // buffer stays in place): a window that does not fit writes a value
      // that leaves the operand as it is, at its clamped start.
      mx::Shape vshape = to_shape(p.batch_shape);
      vshape.insert(vshape.end(), full_window.size(), 1);
      mx::array keep = in_place == InPlace::kOwnWindow
                           ? covered()
                           : *kind == ScatterKind::kMul ? mx::array(1, u.dtype())
                           // kSub adds -u: +0 here becomes the -0 it adds
                           : *kind == ScatterKind::kSub ? mx::negative(add_identity(u.dtype()))
                                                        : add_identity(u.dtype());
      u = mx::where(mx::reshape(valid, vshape), u, keep);
    }
    const bool pad = in_place == InPlace::kNo && pad_axis >= 0 && !p.index_map.empty();
    if (pad) {
      mx::Shape pad_shape = operand_shape;
      pad_shape[pad_axis] = static_cast<int32_t>(pad_size);
      base = mx::concatenate({a, mx::zeros(pad_shape, a.dtype())}, pad_axis);
      mx::array trash = mx::full(idx[0].shape(), static_cast<int>(operand_shape[pad_axis]), mx::int32);
      idx[0] = mx::where(valid, idx[0], trash);
    }
    mx::array r = [&] {
      switch (*kind) {
        case ScatterKind::kSet: return mx::scatter(base, idx, u, p.axes);
        case ScatterKind::kAdd: return mx::scatter_add(base, idx, u, p.axes);
        case ScatterKind::kSub: return mx::scatter_add(base, idx, mx::negative(u), p.axes);
        case ScatterKind::kMul: return mx::scatter_prod(base, idx, u, p.axes);
        case ScatterKind::kMax: return mx::scatter_max(base, idx, u, p.axes);
        case ScatterKind::kMin: return mx::scatter_min(base, idx, u, p.axes);
      }
      return base;
    }();
    if (pad) r = mx::slice(r, mx::Shape(r.ndim(), 0), operand_shape);
    return Arrays{r};
  };
}

}  // namespace

void register_indexing_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::dynamic_slice, lower_dynamic_slice);
  r.add(Opcode::dynamic_update_slice, lower_dynamic_update_slice);
  r.add(Opcode::gather, lower_gather);
  r.add(Opcode::scatter, lower_scatter);
}

}  // namespace pjrtx::backend
