// stablehlo.while, placed and run: as compiled host code when the host
// loop engine takes it and its iterations are latency-bound
// (loops/host_loop.h), else on MLX as host-driven iterations. MLX has no
// device-side control flow, so each MLX iteration's predicate is read on
// the executor thread.
//
// A general while iteration evaluates its predicate together with the loop
// state: the lazy graph then never grows past one iteration, so memory stays
// bounded for loops of any length. A counted while (loops/counted_loop.h: a
// fori_loop or scan) computes its trip count once at entry and runs the body
// that many times, evaluating the state only every few iterations, with its
// index arithmetic folded on the host (loops/host_fold.h).
#pragma once

#include "backend/mlx/lower_ctx.h"

namespace pjrtx::backend::loops {

// The registry's rule for Opcode::while_ (ops/control.cc registers it).
Kernel lower_while(LowerCtx& ctx);

}  // namespace pjrtx::backend::loops
