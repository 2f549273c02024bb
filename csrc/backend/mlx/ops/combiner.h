// Reduction bodies: recognising `return op(p0, p1)` in a region, and
// applying the matching MLX combine / reduce / cumulative op. Shared by
// reduce, reduce_window and scatter.
#pragma once

#include <optional>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend::ops {

enum class Combiner { kAdd, kMul, kMax, kMin, kAnd, kOr };

// The body's op when it is a single add/multiply/maximum/minimum/and/or of
// its two parameters (either order). On pred, add is OR and multiply AND.
std::optional<Combiner> match_combiner(const compiler::Region& body, DType t);

// Floats follow XLA's max/min: NaN propagates, -0 orders below +0.
mx::array combine(Combiner c, const mx::array& a, const mx::array& b, DType t);

// Whether `value` (a scalar) is c's identity: 0 for add, 1 for mul, -inf /
// the type's min for max, +inf / max for min, true for and, false for or.
bool is_identity(Combiner c, const mx::array& value, DType t);

}  // namespace pjrtx::backend::ops
