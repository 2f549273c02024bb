// Shape and data-movement ops that map onto MLX views: broadcast_in_dim,
// reshape, transpose, slice, concatenate, reverse, iota, and the identities
// (optimization_barrier).
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

// Operand dim i goes to result dim dims[i]: transpose the operand so the
// mapped dims are increasing, reshape to the result rank with 1s elsewhere,
// then broadcast (a lazy view in MLX).
Kernel lower_broadcast_in_dim(LowerCtx& ctx) {
  const auto& dims = ctx.inst().attr_ints("broadcast_dimensions");
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  if (static_cast<int64_t>(dims.size()) != in.rank())
    ctx.fail("broadcast_dimensions has ", dims.size(), " entries for operand ", in.str());
  std::vector<int> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return dims[a] < dims[b]; });
  bool need_transpose = !std::is_sorted(order.begin(), order.end()) ||
                        std::adjacent_find(order.begin(), order.end(),
                                           [](int a, int b) { return a + 1 != b; }) != order.end();
  mx::Shape mid(out.rank(), 1);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= out.rank())
      ctx.fail("broadcast dimension ", dims[i], " out of range for ", out.str());
    if (in.shape[i] != 1 && in.shape[i] != out.shape[dims[i]])
      ctx.fail("operand dim ", i, " (", in.shape[i], ") does not fit result dim ",
               dims[i], " (", out.shape[dims[i]], ")");
    mid[dims[i]] = static_cast<int32_t>(in.shape[i]);
  }
  mx::Shape target = to_mlx_shape(out.shape);
  bool same = in.shape == out.shape && !need_transpose;
  if (same) return unary([](const mx::array& x) { return x; });
  // broadcast_to aligns trailing dims as NumPy does: when the operand's dims
  // land on the result's last dims in order (a scalar, a bias row), the
  // reshape to `mid` would only add leading 1s, so it is left out.
  size_t lead = mid.size() - dims.size();
  bool trailing = !need_transpose &&
                  std::all_of(mid.begin(), mid.begin() + lead, [](int32_t d) { return d == 1; });
  for (size_t i = 0; trailing && i < dims.size(); ++i)
    trailing = dims[i] == static_cast<int64_t>(lead + i);
  // Only leading 1s added to a reshape's result (a KV-cache update, [4,1,64]
  // -> [1,1,4,1,64]): one reshape of the reshape's input, no new node. A
  // Broadcast of anything else stays: MLX's compile fuses it into an
  // element-wise consumer, where a Reshape would be a node of its own.
  const bool same_size = in.num_elements() == out.num_elements();
  if (trailing)
    return unary([target, same_size](const mx::array& x) {
      if (same_size && is_row_major_view(x)) return reshape_if_needed(x, target);
      return mx::broadcast_to(x, target);
    });
  return unary([order, need_transpose, mid, target](const mx::array& x) {
    mx::array y = need_transpose ? transpose_if_needed(x, order) : x;
    y = reshape_if_needed(y, mid);
    return y.shape() == target ? y : mx::broadcast_to(y, target);
  });
}

Kernel lower_reshape(LowerCtx& ctx) {
  mx::Shape target = to_mlx_shape(ctx.out(0).shape);
  return unary([target](const mx::array& x) { return reshape_if_needed(x, target); });
}

Kernel lower_transpose(LowerCtx& ctx) {
  std::vector<int> perm = to_int_vector(ctx.inst().attr_ints("permutation"));
  if (static_cast<int64_t>(perm.size()) != ctx.in(0).rank())
    ctx.fail("permutation has ", perm.size(), " entries for ", ctx.in(0).str());
  return unary([perm](const mx::array& x) { return transpose_if_needed(x, perm); });
}

Kernel lower_slice(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  auto start = ctx.inst().attr_ints("start_indices");
  auto limit = ctx.inst().attr_ints("limit_indices");
  auto strides = ctx.inst().attr_ints("strides");
  if (static_cast<int64_t>(start.size()) != in.rank() || limit.size() != start.size() ||
      strides.size() != start.size())
    ctx.fail("start/limit/strides must have one entry per dim of ", in.str());
  for (int64_t i = 0; i < in.rank(); ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.shape[i] || strides[i] < 1)
      ctx.fail("invalid slice [", start[i], ":", limit[i], ":", strides[i], "] of dim ", i,
               " of ", in.str());
  }
  mx::Shape s = to_shape(start), l = to_shape(limit), st = to_shape(strides);
  return unary([s, l, st](const mx::array& x) { return mx::slice(x, s, l, st); });
}

Kernel lower_concatenate(LowerCtx& ctx) {
  int axis = static_cast<int>(ctx.inst().attr_int("dimension"));
  if (axis < 0 || axis >= ctx.out(0).rank()) ctx.fail("dimension ", axis, " out of range");
  return nary([axis](const Arrays& in) {
    return in.size() == 1 ? in[0] : mx::concatenate(in, axis);
  });
}

Kernel lower_reverse(LowerCtx& ctx) {
  std::vector<int> dims = to_int_vector(ctx.inst().attr_ints("dimensions"));
  return unary([dims](const mx::array& x) {
    mx::array y = x;
    for (int d : dims) y = mx::flip(y, d);
    return y;
  });
}

// iota along one dim: arange in the result type, reshaped and broadcast.
Kernel lower_iota(LowerCtx& ctx) {
  const auto& out = ctx.out(0);
  int64_t dim = ctx.inst().attr_int("iota_dimension");
  if (dim < 0 || dim >= out.rank()) ctx.fail("iota_dimension ", dim, " out of range for ", out.str());
  mx::Dtype dt = to_mlx(out.dtype);
  int64_t n = out.shape[dim];
  mx::Shape mid(out.rank(), 1);
  mid[dim] = static_cast<int32_t>(n);
  mx::Shape target = to_mlx_shape(out.shape);
  bool is_complex = compiler::is_complex(out.dtype);
  bool is_pred = out.dtype == DType::kPred;
  return [=](RunState&, const Arrays&) {
    // Integer iota counts in int64 and wraps like XLA; floats round.
    mx::array a = mx::arange(0.0, static_cast<double>(n), 1.0,
                             compiler::is_float(out.dtype) ? mx::float32 : mx::int64);
    if (is_pred)
      a = mx::not_equal(a, mx::zeros_like(a));
    else if (is_complex || a.dtype() != dt)
      a = mx::astype(a, dt);
    return Arrays{mx::broadcast_to(mx::reshape(a, mid), target)};
  };
}

Kernel lower_identity(LowerCtx& ctx) {
  return [](RunState&, const Arrays& in) { return in; };
}

}  // namespace

void register_structural_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::broadcast_in_dim, lower_broadcast_in_dim);
  r.add(Opcode::reshape, lower_reshape);
  r.add(Opcode::transpose, lower_transpose);
  r.add(Opcode::slice, lower_slice);
  r.add(Opcode::concatenate, lower_concatenate);
  r.add(Opcode::reverse, lower_reverse);
  r.add(Opcode::iota, lower_iota);
  r.add(Opcode::optimization_barrier, lower_identity);
  // Sharding annotations: one device, so the value passes through.
  r.add(Opcode::sdy_sharding_constraint, lower_identity);
  r.add(Opcode::sdy_reshard, lower_identity);
}

}  // namespace pjrtx::backend
