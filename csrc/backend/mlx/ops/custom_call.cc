// stablehlo.custom_call: the targets JAX emits that are identities on one
// device (sharding annotations and memory-placement markers). Any other
// target fails at compile time naming it. dce_sink produces nothing.
#include <set>
#include <string>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

const std::set<std::string>& identity_targets() {
  static const std::set<std::string> targets = {
      "Sharding",                    // GSPMD sharding annotation
      "SPMDFullToShardShape",        // shard_map entry under GSPMD (one shard)
      "SPMDShardToFullShape",        // shard_map exit under GSPMD
      "annotate_device_placement",   // memory-kind placement marker
      "MoveToHost", "MoveToDevice",  // host-offload markers: one memory here
      "LayoutConstraint",            // pjrtx uses dense row-major layouts
  };
  return targets;
}

Kernel lower_custom_call(LowerCtx& ctx) {
  const std::string& target = ctx.inst().attr_str("call_target_name");
  if (identity_targets().count(target)) {
    if (ctx.num_in() != ctx.num_out())
      ctx.fail("custom_call @", target, " with ", ctx.num_in(), " operands and ", ctx.num_out(),
               " results is not an identity");
    for (size_t i = 0; i < ctx.num_in(); ++i)
      if (ctx.in(i) != ctx.out(i))
        ctx.fail("custom_call @", target, " changes ", ctx.in(i).str(), " into ", ctx.out(i).str());
    return [](RunState&, const Arrays& in) { return in; };
  }
  // lax.dce_sink: keeps its operands alive against dead-code elimination
  // and produces nothing; a plan runs every instruction anyway.
  if (target == "dce_sink" && ctx.num_out() == 0)
    return [](RunState&, const Arrays&) { return Arrays{}; };
  ctx.fail("pjrtx: unsupported custom_call target '", target, "'");
}

}  // namespace

void register_custom_call_ops(Registry& r) {
  r.add(compiler::Opcode::custom_call, lower_custom_call);
}

}  // namespace pjrtx::backend
