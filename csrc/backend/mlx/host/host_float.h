// The f32/f64 host forms (host_small.h describes the host tier): float
// arithmetic with one IEEE answer on small computed values. host_small.cc
// asks for them when PJRTX_HOST=all; a header of its own so the host tier's
// detail header stays below both.
#pragma once

#include "backend/mlx/region_program.h"

namespace pjrtx::backend {

// The f32/f64 host form of `inst` (empty when it has none).
HostForm float_kernel(const compiler::Plan& plan, const compiler::Instruction& inst);
// A float reduce whose body is `body` (add, maximum or minimum).
HostForm float_reduce_kernel(const compiler::Plan& plan, const compiler::Instruction& inst,
                             compiler::Opcode body);

}  // namespace pjrtx::backend
