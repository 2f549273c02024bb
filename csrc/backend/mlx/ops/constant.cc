// stablehlo.constant: the dense data becomes one MLX array at compile time;
// every run hands out that same (immutable) array.
#include "backend/mlx/ops/common.h"
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
    return array_from_host(d.bytes.data(), t, nullptr);
  }();
  return [value](RunState&, const Arrays&) { return Arrays{value}; };
}

}  // namespace

void register_constant_ops(Registry& r) {
  r.add(compiler::Opcode::constant, lower_constant);
}

}  // namespace pjrtx::backend
