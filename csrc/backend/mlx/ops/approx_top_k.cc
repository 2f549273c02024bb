// custom_call @ApproxTopK (lax.approx_max_k / approx_min_k), computed exactly
// as XLA:CPU does: JAX marks it is_fallback off TPU, and XLA's fallback sorts
// every operand along reduction_dim with the comparator and keeps the first
// N of each, N being the result's size on that dim (top_k when
// aggregate_to_topk, else ApproxTopKReductionOutputSize(...) >= top_k, which
// JAX already put into the result type; recall_target and
// reduction_input_size_override only choose that N).
//
// Operands, as jax/_src/lax/ann.py emits them: (x, iota along the reduction
// dim, init value for x, -1 as init for the iota); results (values, indices)
// with the reduction dim cut to N. mhlo.backend_config holds reduction_dim
// and top_k; called_computations names the comparator, `compare GT` for
// approx_max_k and `compare LT` for approx_min_k. The direction is read by
// running the comparator at compile time on finite probes. Ties keep index
// order (a stable sort; XLA's unstable sort leaves their order unspecified);
// NaNs, which a plain GT/LT comparator leaves unordered in XLA, sort last.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

constexpr const char* kConfig = "mhlo.backend_config.";

// +1 when cmp(a, b) is "a > b" on finite values, -1 when it is "a < b".
int comparator_direction(LowerCtx& ctx, const std::string& name, DType t) {
  auto cmp = ctx.lower_function(name);
  if (cmp->params.size() != 4)
    ctx.fail("comparator @", name, " takes ", cmp->params.size(), " arguments; expected 4");
  // Pairs over {-1.5, 0.25, 2}, equal ones included, so "a >= b" and
  // "a != b" are told apart from "a > b".
  const std::vector<float> av = {-1.5f, -1.5f, -1.5f, 0.25f, 0.25f, 0.25f, 2.f, 2.f, 2.f};
  const std::vector<float> bv = {-1.5f, 0.25f, 2.f, -1.5f, 0.25f, 2.f, -1.5f, 0.25f, 2.f};
  mx::Dtype dt = to_mlx(storage_dtype(t));
  mx::array a = mx::astype(mx::array(av.data(), {9}, mx::float32), dt);
  mx::array b = mx::astype(mx::array(bv.data(), {9}, mx::float32), dt);
  mx::array i = mx::zeros({9}, mx::int32);
  RunState st = ctx.constant_state();
  Arrays out = cmp->run_batched(st, {a, b, i, i});
  if (out.size() != 1) ctx.fail("comparator @", name, " returns ", out.size(), " values; expected 1");
  mx::array got = mx::astype(mx::broadcast_to(out[0], {9}), mx::uint8);
  got.eval();
  bool gt = true, lt = true;
  for (size_t k = 0; k < av.size(); ++k) {
    bool v = got.data<uint8_t>()[k] != 0;
    gt &= v == (av[k] > bv[k]);
    lt &= v == (av[k] < bv[k]);
  }
  if (gt) return 1;
  if (lt) return -1;
  ctx.fail("comparator @", name, " is neither `a > b` nor `a < b`");
}

Kernel lower_approx_top_k(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  if (ctx.num_in() != 4 || ctx.num_out() != 2)
    ctx.fail("custom_call @ApproxTopK expects (operand, iota, init, init_index) -> (values, indices); got ",
             ctx.num_in(), " operands and ", ctx.num_out(), " results");
  const auto& x = ctx.in(0);
  if (!compiler::is_float(x.dtype)) ctx.fail("custom_call @ApproxTopK operand must be a float, got ", x.str());
  if (ctx.in(1).shape != x.shape || ctx.in(1).dtype != DType::kS32)
    ctx.fail("custom_call @ApproxTopK index operand ", ctx.in(1).str(), " does not match ", x.str());
  int64_t rank = x.rank();
  int64_t dim = inst.attr_int(std::string(kConfig) + "reduction_dim");
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) ctx.fail("custom_call @ApproxTopK reduction_dim out of range for ", x.str());
  int64_t top_k = inst.attr_int(std::string(kConfig) + "top_k");
  int64_t n = ctx.out(0).shape[dim];
  for (size_t r = 0; r < 2; ++r) {
    compiler::Shape want = x.shape;
    want[dim] = n;
    if (ctx.out(r).shape != want || ctx.out(r).dtype != ctx.in(r).dtype)
      ctx.fail("custom_call @ApproxTopK result ", ctx.out(r).str(), " does not match operand ",
               ctx.in(r).str(), " cut to ", n, " along dim ", dim);
  }
  if (top_k <= 0 || top_k > n || n > x.shape[dim])
    ctx.fail("custom_call @ApproxTopK top_k=", top_k, " with ", n, " results of ", x.shape[dim],
             " along dim ", dim);
  auto it = inst.attrs.find("called_computations");
  const auto* names = it == inst.attrs.end() ? nullptr : std::get_if<std::vector<std::string>>(&it->second);
  if (names == nullptr || names->size() != 1)
    ctx.fail("custom_call @ApproxTopK needs one comparator in called_computations");
  bool descending = comparator_direction(ctx, names->front(), x.dtype) > 0;
  int axis = static_cast<int>(dim);
  int count = static_cast<int>(n);
  return [descending, axis, count](RunState&, const Arrays& in) {
    // Negation is exact and keeps NaN a NaN, which MLX sorts last.
    mx::array key = descending ? mx::negative(in[0]) : in[0];
    mx::array perm = mx::argsort(key, axis);
    mx::Shape start(perm.ndim(), 0);
    mx::Shape stop = perm.shape();
    stop[axis] = count;
    perm = mx::slice(perm, start, stop);
    return Arrays{mx::take_along_axis(in[0], perm, axis), mx::take_along_axis(in[1], perm, axis)};
  };
}

}  // namespace

void register_approx_top_k_ops(Registry& r) { r.add_target("ApproxTopK", lower_approx_top_k); }

}  // namespace pjrtx::backend
