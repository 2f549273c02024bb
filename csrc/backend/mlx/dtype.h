// Plan element types <-> MLX dtypes.
#pragma once

#include <mlx/array.h>
#include <mlx/dtype.h>

#include "compiler/types.h"

namespace pjrtx::backend {

namespace mx = mlx::core;

// Throws UNIMPLEMENTED naming the type when MLX cannot represent it (c128,
// token, ...).
mx::Dtype to_mlx(compiler::DType t);
compiler::DType from_mlx(mx::Dtype t);
mx::Shape to_mlx_shape(const compiler::Shape& s);

}  // namespace pjrtx::backend
