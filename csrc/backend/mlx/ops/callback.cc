// custom_call @pjrtx_callback: a Python host callback as one host kernel
// (host/host_kernel.h) on MLX's CPU stream. pjrtx.jax_rules.callbacks emits it for
// jax.pure_callback, io_callback, debug.callback/print and checkify.
//
//   operands: [token?] data...   results: [token?] data...
//   backend_config: the callable's id; has_side_effect: io/debug/check.
//
// The kernel always has one more output than the data results, a bool
// scalar written when the callable has returned: it is the token result of
// an ordered callback and, for side-effecting ones, the run's "effect". Each
// side-effecting callback takes the previous effect of the run as an input,
// so effects run in program order as on XLA:CPU (which runs its thunks in
// sequence) even when no token orders them, and evaluating the last effect
// with the outputs (RunState::effects) runs every one of them, including
// callbacks with no results (debug.print).
//
// The callables' table and the runner live below the op families, in
// host_callback.cc: a compiled host loop calls callbacks too.
#include <cstdint>
#include <string>

#include "backend/mlx/host_callback.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/ops/common.h"
#include "common/error.h"

namespace pjrtx::backend {

namespace {

Kernel lower_callback(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  const std::string& cfg = inst.attr_str("backend_config", "");
  const std::optional<uint64_t> parsed = parse_callback_id(cfg);
  if (!parsed)
    ctx.fail("custom_call @pjrtx_callback needs a callback id as backend_config, got '", cfg,
             "'");
  const uint64_t id = *parsed;
  bool effect = inst.attr_bool("has_side_effect", false);

  std::vector<size_t> data_in, token_in;
  std::vector<compiler::TensorType> in_types, out_types;
  for (size_t i = 0; i < ctx.num_in(); ++i) {
    if (ctx.in(i).dtype == compiler::DType::kToken) {
      token_in.push_back(i);
    } else {
      data_in.push_back(i);
      to_mlx(storage_dtype(ctx.in(i).dtype));  // throws naming a type MLX lacks
      in_types.push_back(ctx.in(i));
    }
  }
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  std::vector<bool> out_is_token;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    const auto& t = ctx.out(i);
    out_is_token.push_back(t.dtype == compiler::DType::kToken);
    if (out_is_token.back()) continue;
    out_types.push_back(t);
    shapes.push_back(storage_shape(t));
    dtypes.push_back(to_mlx(storage_dtype(t.dtype)));
  }
  // XLA replaces an op with only empty results by constants unless it has
  // side effects, so XLA:CPU never calls such a pure callback: neither do we.
  bool all_empty = !out_types.empty();
  for (const auto& t : out_types) all_empty = all_empty && t.num_elements() == 0;
  if (!effect && all_empty && token_in.empty()) {
    return [shapes, dtypes](RunState&, const Arrays&) {
      Arrays out;
      for (size_t i = 0; i < shapes.size(); ++i) out.push_back(mx::zeros(shapes[i], dtypes[i]));
      return out;
    };
  }
  shapes.push_back({});  // the "done" flag
  dtypes.push_back(mx::bool_);

  CallbackRef ref = retain_callback(id);
  HostFn fn = [id, ref, in_types, out_types](const Arrays& in, Arrays& out) {
    std::vector<HostArray> args, results;
    for (size_t i = 0; i < in_types.size(); ++i)
      args.push_back({const_cast<uint8_t*>(in[i].data<uint8_t>()),
                      static_cast<int64_t>(in[i].nbytes()), in_types[i]});
    for (size_t i = 0; i < out_types.size(); ++i)
      results.push_back({out[i].data<uint8_t>(), static_cast<int64_t>(out[i].nbytes()),
                         out_types[i]});
    run_host_callback(id, args, results);
    *out.back().data<bool>() = true;
  };
  return [=](RunState& st, const Arrays& in) {
    Arrays ins;
    for (size_t i : data_in) ins.push_back(in[i]);
    // Ordering inputs, after the data the callable sees.
    for (size_t i : token_in) ins.push_back(in[i]);
    if (effect && !st.effects.empty()) ins.push_back(st.effects.back());
    Arrays outs = host_kernel("pjrtx_callback", ins, shapes, dtypes, fn);
    const mx::array& done = outs.back();
    if (effect) st.effects.push_back(done);
    Arrays results;
    size_t k = 0;
    for (bool tok : out_is_token) results.push_back(tok ? done : outs[k++]);
    return results;
  };
}

}  // namespace

void register_callback_ops(Registry& r) { r.add_target(kCallbackTarget, lower_callback); }

}  // namespace pjrtx::backend
