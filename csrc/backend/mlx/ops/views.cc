// Reshapes and transposes that look through earlier views (see common.h).
#include <cstring>

#include <mlx/primitives.h>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend::ops {

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

mx::array reshape_if_needed(const mx::array& x, const mx::Shape& shape) {
  if (x.shape() == shape) return x;
  const mx::array* src = &x;
  while (is_row_major_view(*src)) src = &src->inputs()[0];
  return src->shape() == shape ? *src : mx::reshape(*src, shape);
}

mx::array transpose_if_needed(const mx::array& x, const std::vector<int>& perm) {
  if (is_identity(perm)) return x;
  if (x.has_primitive() && x.inputs().size() == 1 && x.siblings().empty() &&
      std::strcmp(x.primitive().name(), "Transpose") == 0) {
    // transpose(transpose(y, inner), perm) == transpose(y, inner[perm[i]]).
    const auto inner = static_cast<const mx::Transpose&>(x.primitive()).state();
    std::vector<int> composed(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) composed[i] = inner[perm[i]];
    const mx::array& y = x.inputs()[0];
    return is_identity(composed) ? y : mx::transpose(y, composed);
  }
  return mx::transpose(x, perm);
}

}  // namespace pjrtx::backend::ops
