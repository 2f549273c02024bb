// a * b + c rounded once, elementwise over float32 arrays of one shape, as
// an MLX primitive on the CPU stream (backend/mlx/fma_contract.h makes the
// ops that need it). MLX has no fused multiply-add; computing one through
// float64 would hold three float64 copies of the operands and give up
// MLX's reuse of a donated operand's storage, which this node keeps.
#pragma once

#include "backend/mlx/arrays.h"

namespace pjrtx::backend {

// a, b, c: float32, one shape (broadcast views allowed). Only where the CPU
// has FMA (common/cpu_features.h): elsewhere the fused add is never made.
mx::array fused_multiply_add_f32(const mx::array& a, const mx::array& b, const mx::array& c);

}  // namespace pjrtx::backend
