// stablehlo.constant: the dense data becomes one MLX array at compile time;
// every run hands out that same (immutable) array. The array is a view of
// the plan's bytes (which the pool in compiler/dense_pool.h shares between
// plans), so a weight is held once, not in the plan and again in MLX.
#include <cstdint>
#include <optional>

#include "backend/mlx/ops/common.h"
#include "backend/mlx/constant_pool.h"
#include "backend/mlx/transfer.h"

namespace pjrtx::backend {

namespace {

Kernel lower_constant(LowerCtx& ctx) {
  const compiler::DenseData& d = ctx.inst().attr_dense("value");
  const compiler::TensorType& t = ctx.out(0);
  if (d.type.dtype != t.dtype)
    ctx.fail("value type ", d.type.str(), " differs from result ", t.str());
  mx::array value = [&] {
    if (d.splat) {
      compiler::TensorType one{t.dtype, {}};
      if (static_cast<int64_t>(d.bytes.size()) != compiler::dtype_size(t.dtype))
        ctx.fail("splat holds ", d.bytes.size(), " bytes for ", t.str());
      mx::array s = array_from_host(d.bytes.data(), one, nullptr);
      return mx::broadcast_to(s, to_mlx_shape(t.shape));
    }
    if (static_cast<int64_t>(d.bytes.size()) != t.byte_size())
      ctx.fail("holds ", d.bytes.size(), " bytes for ", t.str());
    // 4-bit and f4 bytes are canonicalised on the way in (a copy); the rest
    // are in MLX's layout already, and in an MLX buffer where the back end's
    // storage made them (constant_pool.cc): the array is a view of that
    // buffer and keeps the DenseData alive through its deleter.
    const bool same_layout =
        !compiler::is_subbyte_int(t.dtype) && t.dtype != compiler::DType::kF4E2M1FN;
    if (same_layout && !d.bytes.empty() && d.bytes.handle() != nullptr &&
        d.bytes.storage() == mlx_dense_storage()) {
      std::shared_ptr<const compiler::DenseData> keep = ctx.inst().attr_dense_ptr("value");
      mx::allocator::Data data(mx::allocator::Buffer(d.bytes.handle()),
                               [keep](mx::allocator::Buffer) mutable { keep.reset(); });
      return mx::array(std::move(data), to_mlx_shape(t.shape), to_mlx(t.dtype));
    }
    return array_from_host(d.bytes.data(), t, nullptr);
  }();
  // A complex splat is a broadcast of a one-element array (trace_safe_constant).
  std::optional<mx::array> splat_elem;
  if (d.splat && compiler::is_complex(t.dtype))
    splat_elem = array_from_host(d.bytes.data(), {t.dtype, {}}, nullptr);
  mx::Shape shape = to_mlx_shape(t.shape);
  return [value, splat_elem, shape](RunState&, const Arrays&) {
    if (!tracing_segment()) return Arrays{value};
    if (splat_elem) return Arrays{mx::broadcast_to(trace_safe_constant(*splat_elem), shape)};
    return Arrays{trace_safe_constant(value)};
  };
}

}  // namespace

void register_constant_ops(Registry& r) {
  r.add(compiler::Opcode::constant, lower_constant);
}

}  // namespace pjrtx::backend
