#include "backend/mlx/dtype.h"

#include <cstdint>
#include <mlx/ops.h>

#include "common/error.h"

namespace pjrtx::backend {

using compiler::DType;

mx::Dtype to_mlx(DType t) {
  switch (t) {
    case DType::kPred: return mx::bool_;
    case DType::kS8: return mx::int8;
    case DType::kS16: return mx::int16;
    case DType::kS32: return mx::int32;
    case DType::kS64: return mx::int64;
    case DType::kU8: return mx::uint8;
    case DType::kU16: return mx::uint16;
    case DType::kU32: return mx::uint32;
    case DType::kU64: return mx::uint64;
    case DType::kF16: return mx::float16;
    case DType::kBF16: return mx::bfloat16;
    case DType::kF32: return mx::float32;
    case DType::kF64: return mx::float64;
    case DType::kC64: return mx::complex64;
    // MLX has no complex128: a c128 value is f64 pairs (complex128.h).
    case DType::kC128: return mx::float64;
    // MLX has no 4-bit type: one value per byte (see compiler/types.h).
    case DType::kS4: return mx::int8;
    case DType::kU4: return mx::uint8;
    case DType::kS2: return mx::int8;
    case DType::kU2: return mx::uint8;
    default:
      // Small floats live as their bytes (backend/mlx/small_float.h).
      if (compiler::is_small_float(t)) return mx::uint8;
      unimplemented("pjrtx: element type ", compiler::dtype_name(t),
                    " has no MLX equivalent");
  }
}

DType from_mlx(mx::Dtype t) {
  switch (t.val()) {
    case mx::Dtype::Val::bool_: return DType::kPred;
    case mx::Dtype::Val::int8: return DType::kS8;
    case mx::Dtype::Val::int16: return DType::kS16;
    case mx::Dtype::Val::int32: return DType::kS32;
    case mx::Dtype::Val::int64: return DType::kS64;
    case mx::Dtype::Val::uint8: return DType::kU8;
    case mx::Dtype::Val::uint16: return DType::kU16;
    case mx::Dtype::Val::uint32: return DType::kU32;
    case mx::Dtype::Val::uint64: return DType::kU64;
    case mx::Dtype::Val::float16: return DType::kF16;
    case mx::Dtype::Val::bfloat16: return DType::kBF16;
    case mx::Dtype::Val::float32: return DType::kF32;
    case mx::Dtype::Val::float64: return DType::kF64;
    case mx::Dtype::Val::complex64: return DType::kC64;
  }
  return DType::kInvalid;
}

DType storage_dtype(DType t) {
  if (t == DType::kC128) return DType::kF64;
  if (t == DType::kS4 || t == DType::kS2) return DType::kS8;
  if (t == DType::kU4 || t == DType::kU2 || compiler::is_small_float(t)) return DType::kU8;
  return t;
}

mx::array canonical_subbyte(const mx::array& x, DType t) {
  if (!compiler::is_subbyte_int(t)) return x;
  const int bits = compiler::dtype_bits(t);
  const int mask = (1 << bits) - 1, half = 1 << (bits - 1);
  if (compiler::is_unsigned_int(t)) return mx::bitwise_and(x, mx::array(mask, mx::uint8));
  // ((x & 15) ^ 8) - 8 maps 0..7 to 0..7 and 8..15 to -8..-1 (s2: & 3, ^ 2,
  // - 2) without shifting a negative int8.
  mx::array low = mx::bitwise_and(x, mx::array(mask, mx::int8));
  return mx::subtract(mx::bitwise_xor(low, mx::array(half, mx::int8)), mx::array(half, mx::int8));
}

mx::Shape to_mlx_shape(const compiler::Shape& s) {
  mx::Shape out;
  out.reserve(s.size());
  for (int64_t d : s) {
    if (d > INT32_MAX)
      invalid_argument("pjrtx: dimension ", d, " exceeds MLX's int32 shape limit");
    out.push_back(static_cast<int32_t>(d));
  }
  return out;
}

mx::Shape storage_shape(const compiler::TensorType& t) {
  mx::Shape s = to_mlx_shape(t.shape);
  if (t.dtype == DType::kC128) s.push_back(2);
  return s;
}

}  // namespace pjrtx::backend
