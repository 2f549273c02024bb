// stablehlo.bitcast_convert. Same width: a reinterpretation. A wider input
// (f32 -> u8) gains a trailing dim of width ratio; a narrower input
// (u8[..., 4] -> f32) loses its last dim. mx::view rescales the last dim
// instead, so reshape around it. Byte order is the host's (little-endian),
// as in XLA.
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

Kernel lower_bitcast_convert(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  if (in.dtype == DType::kPred || out.dtype == DType::kPred)
    ctx.fail("bitcasts of pred are not supported: ", in.str(), " -> ", out.str());
  int from = compiler::dtype_bits(in.dtype), to = compiler::dtype_bits(out.dtype);
  mx::Dtype dt = to_mlx(out.dtype);
  mx::Shape out_shape = to_mlx_shape(out.shape);
  if (from == to)
    return unary([dt](const mx::array& x) { return mx::view(x, dt); });
  if (from > to) {  // one element becomes from/to elements in a new last dim
    return unary([dt, out_shape](const mx::array& x) {
      mx::array flat = x.ndim() == 0 ? mx::reshape(x, {1}) : x;
      return mx::reshape(mx::view(flat, dt), out_shape);
    });
  }
  // from < to: the last dim (of size to/from) folds into one element.
  if (in.rank() == 0 || in.shape.back() * from != to)
    ctx.fail("the last dim of ", in.str(), " must hold one ", out.str(), " element");
  return unary([dt, out_shape](const mx::array& x) {
    mx::array y = mx::view(mx::contiguous(x), dt);
    return mx::reshape(y, out_shape);
  });
}

}  // namespace

void register_bitcast_ops(Registry& r) {
  r.add(compiler::Opcode::bitcast_convert, lower_bitcast_convert);
}

}  // namespace pjrtx::backend
