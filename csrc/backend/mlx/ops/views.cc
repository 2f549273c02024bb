// Reshapes that look through earlier reshape-like views (see common.h).
#include <cstring>

#include <mlx/primitives.h>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend::ops {

namespace {

// Primitives whose output is their single input's elements in row-major
// order under another shape: a reshape of their output equals the same
// reshape of their input.
bool is_row_major_view(const mx::array& a) {
  if (!a.has_primitive() || a.inputs().size() != 1 || a.siblings().size() != 0) return false;
  const char* n = a.primitive().name();
  for (const char* v : {"Reshape", "Squeeze", "ExpandDims", "Flatten", "Unflatten"})
    if (std::strcmp(n, v) == 0) return a.inputs()[0].dtype() == a.dtype();
  return false;
}

}  // namespace

mx::array reshape_if_needed(const mx::array& x, const mx::Shape& shape) {
  if (x.shape() == shape) return x;
  const mx::array* src = &x;
  while (is_row_major_view(*src)) src = &src->inputs()[0];
  return src->shape() == shape ? *src : mx::reshape(*src, shape);
}

}  // namespace pjrtx::backend::ops
