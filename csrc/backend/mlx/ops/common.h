// Small helpers shared by the op families.
#pragma once

#include <mlx/ops.h>

#include <cstdint>
#include <limits>

#include "backend/mlx/dtype.h"
#include "backend/mlx/registry.h"
#include "compiler/types.h"

namespace pjrtx::backend::ops {

using compiler::DType;

inline mx::array int_scalar(int64_t v, mx::Dtype dt) { return mx::array(v, dt); }
// All bits set in an integer type (-1 for signed, max for unsigned).
inline mx::array all_ones(mx::Dtype dt) { return mx::astype(mx::array(int64_t{-1}, mx::int64), dt); }

inline int64_t signed_min(DType t) {
  switch (t) {
    case DType::kS2: return -2;
    case DType::kS4: return -8;
    case DType::kS8: return std::numeric_limits<int8_t>::min();
    case DType::kS16: return std::numeric_limits<int16_t>::min();
    case DType::kS32: return std::numeric_limits<int32_t>::min();
    default: return std::numeric_limits<int64_t>::min();
  }
}

// The same-width integer types, for bit views; 4 bits give the byte that
// stores them.
inline mx::Dtype signed_of_width(int bits) {
  switch (bits) {
    case 2: case 4: case 8: return mx::int8;
    case 16: return mx::int16;
    case 32: return mx::int32;
    default: return mx::int64;
  }
}
inline mx::Dtype unsigned_of_width(int bits) {
  switch (bits) {
    case 2: case 4: case 8: return mx::uint8;
    case 16: return mx::uint16;
    case 32: return mx::uint32;
    default: return mx::uint64;
  }
}

// True where the float's sign bit is set (also for -0 and -NaN).
inline mx::array sign_bit(const mx::array& x, DType t) {
  return mx::less(mx::view(x, signed_of_width(compiler::dtype_bits(t))),
                  mx::array(0, signed_of_width(compiler::dtype_bits(t))));
}

// XLA's float max/min order -0 below +0 (IEEE 754-2019 maximum/minimum) and
// propagate NaN; MLX's maximum(+0, -0) returns -0 (it keeps b unless a > b).
// Equal operands are the only case that needs the sign of zero, and for two
// zeros IEEE addition gives it: a + b is -0 only when both are -0 (max),
// -((-a) + (-b)) is +0 only when both are +0 (min). Arithmetic, not a bit
// view of the operand, so MLX's compile fuses the whole guard into one
// kernel (a view is a primitive of its own).
inline mx::array ieee_maximum(const mx::array& a, const mx::array& b, DType t) {
  if (!compiler::is_float(t)) return mx::maximum(a, b);
  mx::array zero = mx::array(0.0f, a.dtype());
  mx::array tie = mx::where(mx::equal(a, zero), mx::add(a, b), a);
  return mx::where(mx::equal(a, b), tie, mx::maximum(a, b));
}
inline mx::array ieee_minimum(const mx::array& a, const mx::array& b, DType t) {
  if (!compiler::is_float(t)) return mx::minimum(a, b);
  mx::array zero = mx::array(0.0f, a.dtype());
  mx::array tie = mx::where(mx::equal(a, zero), mx::negative(mx::add(mx::negative(a), mx::negative(b))), a);
  return mx::where(mx::equal(a, b), tie, mx::minimum(a, b));
}

// complex64 from f32 real and imaginary parts, bit for bit: re + im * 1i
// would compute inf * 0 = NaN into the real part when im is infinite.
inline mx::array make_complex(const mx::array& re, const mx::array& im) {
  mx::array pair = mx::stack({mx::astype(re, mx::float32), mx::astype(im, mx::float32)}, -1);
  return mx::squeeze(mx::view(pair, mx::complex64), -1);
}

// f64 exp, sin and cos accurate to a few ulps (ops/elementwise.cc): MLX's
// CPU kernels evaluate these three in float32 for every input type.
mx::array exp_f64(const mx::array& x);
mx::array sin_f64(const mx::array& x);
mx::array cos_f64(const mx::array& x);

inline std::vector<int> to_int_vector(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

inline mx::Shape to_shape(const std::vector<int64_t>& v) {
  mx::Shape s;
  for (int64_t x : v) s.push_back(static_cast<int32_t>(x));
  return s;
}

// Views that add no MLX primitive when they would change nothing. Each
// primitive left in a graph is a node MLX schedules (and on Metal may be a
// launch); XLA's StableHLO is full of identity transposes and reshapes once
// dot_general and broadcast_in_dim are mapped onto MLX's shapes.
inline bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

// Whether `a` is a reshape-like view (reshape, squeeze, expand_dims,
// flatten, unflatten) of a single input of its dtype.
bool is_row_major_view(const mx::array& a);

// x reshaped to `shape`: nothing when the shape is already right, and a
// reshape of the array under a chain of reshape-like views (reshape,
// squeeze, expand_dims, flatten, unflatten: all read elements in row-major
// order), so reshape(reduce(...)) chains add at most one node (ops/views.cc).
mx::array reshape_if_needed(const mx::array& x, const mx::Shape& shape);

// x transposed by `perm`: nothing for the identity, and one transpose of
// the array under an earlier transpose (the two permutations composed), so
// a layout change undone or redone by the next op adds at most one node.
mx::array transpose_if_needed(const mx::array& x, const std::vector<int>& perm);

}  // namespace pjrtx::backend::ops
