// The 8- and 4-bit float types (f8e4m3fn, f8e5m2, ..., f4e2m1fn). MLX has
// none of them, so their values live as bytes (uint8, one value per byte,
// f4e2m1fn in the low nibble) and every op that computes on them goes
// through f32: decode is exact, encode rounds once to nearest-even with the
// type's overflow, NaN and zero rules, bit for bit what XLA:CPU does.
#pragma once

#include <cstdint>
#include <mlx/array.h>

#include "compiler/types.h"

namespace pjrtx::backend {

namespace mx = mlx::core;

// bytes (uint8) of type t -> float32 values. Exact: every small float is an
// f32. NaNs become the quiet NaN 0x7fc00000 with the byte's sign, except the
// FNUZ types' one NaN (0x80), which reads as +NaN as on XLA:CPU.
// `to` may also be float16 or bfloat16 (every small float but e8m0 is exact
// there; NaNs keep their sign, which MLX's f32 -> f16 cast would drop).
mx::array decode_small_float(const mx::array& bytes, compiler::DType t, mx::Dtype to = mx::float32);

// float32 or float64 values -> bytes (uint8) of type t, rounded once from
// the source width (an f64 is not rounded to f32 first, as XLA:CPU). Any
// other source dtype is cast to float32 first (exact for f16 and bf16).
mx::array encode_small_float(const mx::array& x, compiler::DType t);

// The value of one byte of type t as a double (NaN for NaN encodings); for
// tests and tables.
double small_float_value(uint8_t byte, compiler::DType t);

}  // namespace pjrtx::backend
