// Placement of a stablehlo.while: latency-bound loops run whole as compiled
// host code, everything else on MLX (ops/control.cc).
//
// A loop iteration on MLX is tens to hundreds of MLX primitives at ~3-8 us
// each on MLX's CPU device, plus a wait whenever MLX computes the predicate;
// on the host the same iteration is a few nanoseconds per element
// (jax_smoke/bench_loop_engines.py). So a loop runs on the host when the
// engine takes every op in it (loops/emit_cxx.h) and its per-iteration work
// (elements its ops write, plus multiply-adds of dots) is at most
// PJRTX_LOOP_WORK per op: work a host core does in about the time MLX
// spends dispatching one primitive. PJRTX_LOOPS=host|mlx forces either way.
//
// The host form is one node of the MLX graph (host/host_kernel.h) on the CPU
// stream: it waits for its inputs once, runs every iteration as machine code
// with no Python and no GIL, and hands its results on; on a GPU device MLX
// fences the streams, so the loop waits for the device once per loop.
// PJRTX_TRACE prints each decision and its reason; PJRTX_PROFILE shows the
// build and each run.
#pragma once

#include <optional>

#include "backend/mlx/lower_ctx.h"

namespace pjrtx::backend::loops {

// The host form of the while instruction ctx lowers, or nullopt when it
// stays on MLX.
std::optional<Kernel> place_while(LowerCtx& ctx);

}  // namespace pjrtx::backend::loops
