// General padding (negative edges crop, interior padding spreads), shared by
// stablehlo.pad and convolution's explicit input dilation.
#pragma once

#include "backend/mlx/ops/common.h"

#include <cstdint>

namespace pjrtx::backend::ops {

// lo/hi/interior have one entry per dim of x; value is a scalar of x's type.
mx::array pad_array(const mx::array& x, const mx::array& value, const std::vector<int64_t>& lo,
                    const std::vector<int64_t>& hi, const std::vector<int64_t>& interior);

}  // namespace pjrtx::backend::ops
