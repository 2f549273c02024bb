// stablehlo.select_and_scatter (max/min-pool gradients). For each window
// the select region picks one operand element -- scanning the window in
// row-major order, a candidate replaces the current pick when
// select(pick, candidate) is false, so with GE the first maximum wins --
// and the source value is added (scatter region) at that position into a
// result initialised to init_value. Padding positions are never picked.
// The pick runs batched over all windows at once, one window offset at a
// time; the scatter is one MLX scatter_add on the flattened operand.
#include "backend/mlx/ops/combiner.h"
#include "backend/mlx/ops/window.h"

#include <cstdint>

namespace pjrtx::backend {

namespace {

using namespace ops;

Kernel lower_select_and_scatter(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  const auto& operand = ctx.in(0);
  const auto& source = ctx.in(1);
  int64_t rank = operand.rank();
  Window w = read_window(ctx, rank);
  for (int64_t d = 0; d < rank; ++d)
    if (w.base_dil[d] != 1 || w.win_dil[d] != 1) ctx.fail("dilations are not allowed here");
  DType t = operand.dtype;
  auto scatter = match_combiner(inst.regions.at(1), t);
  if (!scatter || (*scatter != Combiner::kAdd && *scatter != Combiner::kOr))
    ctx.fail("scatter region must add its parameters");
  auto select = ctx.lower_region(inst.regions.at(0));

  // Strided slices of the padded operand, one per window offset.
  mx::Shape padded(rank), place_start(rank), place_stop(rank);
  for (int64_t d = 0; d < rank; ++d) {
    padded[d] = static_cast<int32_t>(operand.shape[d] + w.pad_lo[d] + w.pad_hi[d]);
    place_start[d] = static_cast<int32_t>(w.pad_lo[d]);
    place_stop[d] = static_cast<int32_t>(w.pad_lo[d] + operand.shape[d]);
    if (w.pad_lo[d] < 0 || w.pad_hi[d] < 0) ctx.fail("negative padding");
  }
  int64_t offsets = 1;
  for (int64_t d = 0; d < rank; ++d) offsets *= w.dims[d];
  if (offsets > 4096) ctx.fail("windows of ", offsets, " elements are not supported");
  std::vector<std::pair<mx::Shape, mx::Shape>> slices;
  mx::Shape strides = to_shape(w.strides);
  for (int64_t o = 0; o < offsets; ++o) {
    mx::Shape start(rank), stop(rank);
    int64_t rem = o;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t k = rem % w.dims[d];
      rem /= w.dims[d];
      start[d] = static_cast<int32_t>(k);
      stop[d] = static_cast<int32_t>(source.shape[d] == 0 ? k : k + (source.shape[d] - 1) * w.strides[d] + 1);
    }
    slices.emplace_back(start, stop);
  }
  // Flat operand index of window origin + offset, per source element.
  std::vector<int64_t> op_stride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) op_stride[d] = op_stride[d + 1] * operand.shape[d + 1];
  int64_t total = operand.num_elements();
  mx::Shape src_shape = to_mlx_shape(source.shape), op_shape = to_mlx_shape(operand.shape);
  std::vector<int64_t> dims = w.dims, wstrides = w.strides, lo = w.pad_lo;
  bool empty = source.num_elements() == 0 || total == 0;
  return [=](RunState& st, const Arrays& in) {
    const mx::array& x = in[0];
    const mx::array& src = in[1];
    const mx::array& init = in[2];
    mx::array result = mx::broadcast_to(init, op_shape);
    if (empty) return Arrays{result};
    mx::array canvas = mx::zeros(padded, x.dtype());
    mx::array xp = mx::slice_update(canvas, x, place_start, place_stop);
    mx::array valid = mx::slice_update(mx::zeros(padded, mx::bool_), mx::ones(op_shape, mx::bool_),
                                       place_start, place_stop);
    mx::array has = mx::zeros(src_shape, mx::bool_);
    mx::array best = mx::zeros(src_shape, x.dtype());
    mx::array pick = mx::full(src_shape, -1, mx::int32);
    for (int64_t o = 0; o < offsets; ++o) {
      const auto& [start, stop] = slices[o];
      mx::array cand = mx::slice(xp, start, stop, strides);
      mx::array ok = mx::slice(valid, start, stop, strides);
      mx::array keep = mx::astype(select->run_batched(st, {best, cand})[0], mx::bool_);
      mx::array take = mx::logical_and(ok, mx::logical_or(mx::logical_not(has), mx::logical_not(keep)));
      best = mx::where(take, cand, best);
      pick = mx::where(take, mx::array(static_cast<int>(o), mx::int32), pick);
      has = mx::logical_or(has, ok);
    }
    // Decode the picked offset into an operand position.
    mx::array flat = mx::zeros(src_shape, mx::int32);
    mx::array rem = mx::maximum(pick, mx::array(0, mx::int32));
    for (int64_t d = rank - 1; d >= 0; --d) {
      mx::array k = mx::remainder(rem, mx::array(static_cast<int>(dims[d]), mx::int32));
      rem = mx::floor_divide(rem, mx::array(static_cast<int>(dims[d]), mx::int32));
      mx::Shape ishape(rank, 1);
      ishape[d] = src_shape[d];
      mx::array origin = mx::reshape(mx::arange(0, src_shape[d], 1, mx::int32), ishape);
      mx::array pos = mx::add(mx::multiply(origin, mx::array(static_cast<int>(wstrides[d]), mx::int32)),
                              mx::subtract(k, mx::array(static_cast<int>(lo[d]), mx::int32)));
      flat = mx::add(flat, mx::multiply(pos, mx::array(static_cast<int>(op_stride[d]), mx::int32)));
    }
    // Windows with nothing to pick send their value to a scratch slot.
    flat = mx::where(has, flat, mx::array(static_cast<int>(total), mx::int32));
    mx::array target = mx::zeros({static_cast<int32_t>(total + 1)}, src.dtype());
    mx::array upd = mx::reshape(src, {static_cast<int32_t>(src.size()), 1});
    mx::array summed = mx::scatter_add(target, {mx::flatten(flat)}, upd, std::vector<int>{0});
    summed = mx::reshape(mx::slice(summed, {0}, {static_cast<int32_t>(total)}), op_shape);
    return Arrays{combine(*scatter, result, summed, t)};
  };
}

}  // namespace

void register_select_and_scatter_ops(Registry& r) {
  r.add(compiler::Opcode::select_and_scatter, lower_select_and_scatter);
}

}  // namespace pjrtx::backend
