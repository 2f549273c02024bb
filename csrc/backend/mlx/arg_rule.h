// Whether MLX's argmax/argmin answer as JAX's argmax/argmin do on a device:
// the index of the first NaN, else the lowest index of the extreme, -0 and
// +0 equal. MLX adopted the NaN half of that rule after 0.32.1 (before, every
// back end stepped over NaNs: comparisons with NaN are false), and its GPU
// kernels are separate code from the CPU's, so the rule is not assumed: it is
// checked once per (device, dtype), on that device, by a few small cases.
// JAX's argmax lowers to one mx::argmax where it holds, and to a NaN-aware
// formulation where it does not (ops/reduce.cc).
#pragma once

#include <mlx/device.h>
#include <mlx/dtype.h>

#include <optional>

namespace pjrtx::backend {

namespace mx = mlx::core;

// Evaluates the cases on `device`'s default stream the first time a
// (device, dtype) is asked for; later answers come from a cache. Must run
// where building and evaluating an MLX graph is allowed (the executor thread
// while lowering, or a thread of its own), never inside an mx::compile trace.
bool mlx_arg_rule_holds(const mx::Device& device, mx::Dtype dtype);

// For tests: answer `value` for every (device, dtype) instead of probing,
// or probe again (std::nullopt).
void force_mlx_arg_rule(std::optional<bool> value);

}  // namespace pjrtx::backend
