// stablehlo.bitcast_convert. Same width: a reinterpretation. A wider input
// (f32 -> u8) gains a trailing dim of width ratio; a narrower input
// (u8[..., 4] -> f32) loses its last dim. mx::view rescales the last dim
// instead, so reshape around it. Byte order is the host's (little-endian),
// as in XLA.
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

// 4-bit <-> wider types, in XLA:CPU's packed layout: element j of the last
// dim is bits [4j, 4j + 4) of the wide value, so u4[1, 2] <-> u8 0x21 and
// u4[1..8] <-> u32 0x87654321 (measured on XLA:CPU). The byte-per-value
// storage never shows: nibbles are masked out of it, and program.cc
// sign-extends s4 results.
Kernel nibble_bitcast(LowerCtx& ctx, int from, int to) {
  mx::Dtype dt = to_mlx(ctx.out(0).dtype);
  if (from == 4) {
    const int n = to / 4;
    if (ctx.in(0).rank() == 0 || ctx.in(0).shape.back() != n)
      ctx.fail("the last dim of ", ctx.in(0).str(), " must hold one ", ctx.out(0).str(), " element");
    mx::Dtype ut = unsigned_of_width(to);
    mx::array shifts = mx::astype(mx::multiply(mx::arange(n, mx::int32), mx::array(4)), ut);
    return unary([=](const mx::array& x) {
      mx::array nib = mx::astype(mx::bitwise_and(mx::view(x, mx::uint8), mx::array(0x0f, mx::uint8)), ut);
      // The fields do not overlap, so their sum is their bitwise or.
      mx::array packed = mx::astype(mx::sum(mx::left_shift(nib, shifts), -1), ut);
      return mx::view(packed, dt);
    });
  }
  const int n = from / 4;
  mx::Dtype ut = unsigned_of_width(from);
  mx::array shifts = mx::astype(mx::multiply(mx::arange(n, mx::int32), mx::array(4)), ut);
  return unary([=](const mx::array& x) {
    mx::array u = mx::expand_dims(mx::view(x, ut), -1);
    mx::array nib = mx::bitwise_and(mx::right_shift(u, shifts), mx::array(0x0f, ut));
    return mx::astype(nib, dt);
  });
}

Kernel lower_bitcast_convert(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  if (in.dtype == DType::kPred || out.dtype == DType::kPred)
    ctx.fail("bitcasts of pred are not supported: ", in.str(), " -> ", out.str());
  int from = compiler::dtype_bits(in.dtype), to = compiler::dtype_bits(out.dtype);
  mx::Dtype dt = to_mlx(out.dtype);
  mx::Shape out_shape = to_mlx_shape(out.shape);
  if (from != to && (from == 4 || to == 4)) return nibble_bitcast(ctx, from, to);
  // s4 <-> u4 views the storage byte; program.cc then keeps the low nibble.
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
