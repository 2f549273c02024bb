// MLX semantics that pjrtx's lowerings would like to rely on but that MLX
// only recently adopted, in kernels that differ per back end (CPU, Metal,
// CUDA), so they are checked on the device rather than assumed:
//
// - arg rule: mx::argmax/argmin answer as JAX's argmax/argmin do, with the
//   index of the first NaN, else the lowest index of the extreme, -0 and +0
//   equal. MLX 0.32.1 stepped over NaNs on every back end (comparisons with
//   NaN are false; ml-explore/mlx#4274, fixed by #4291).
// - scan rule: mx::cummax/cummin propagate NaN from its position onwards, as
//   XLA's max/min do (the Metal kernels dropped it, #4044).
//
// Each is probed once per (device, dtype) by a few small cases evaluated on
// that device; where a rule fails, the lowering computes the answer from
// ops that do not depend on it (ops/reduce.cc, ops/reduce_window.cc).
#pragma once

#include <mlx/device.h>
#include <mlx/dtype.h>

#include <optional>

namespace pjrtx::backend {

namespace mx = mlx::core;

// Evaluate the cases on `device`'s default stream the first time a (device,
// dtype) is asked for; later answers come from a cache. Must run where
// building and evaluating an MLX graph is allowed (the executor thread while
// lowering, or a thread of its own), never inside an mx::compile trace.
bool mlx_arg_rule_holds(const mx::Device& device, mx::Dtype dtype);
bool mlx_scan_rule_holds(const mx::Device& device, mx::Dtype dtype);

// The same, on the device a lowering's op of this dtype runs on: the
// thread's default device, except float64, which runs on the CPU stream
// under a GPU device (program.cc).
bool mlx_arg_rule_holds(mx::Dtype dtype);
bool mlx_scan_rule_holds(mx::Dtype dtype);

// For tests: answer `value` for every rule, device and dtype instead of
// probing, or probe again (std::nullopt). Affects programs lowered later.
void force_mlx_rules(std::optional<bool> value);

}  // namespace pjrtx::backend
