// Element types and tensor types of the plan. No MLX here: the back end maps
// these to its own dtypes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pjrtx::compiler {

// One entry per element type the plan can carry. The order is ours; the PJRT
// layer and the back end translate explicitly.
enum class DType : uint8_t {
  kInvalid,
  kPred,
  kS8, kS16, kS32, kS64,
  kU8, kU16, kU32, kU64,
  kF16, kBF16, kF32, kF64,
  kC64, kC128,
  kToken,
  kS4, kU4,
  // Small floats (ml_dtypes' float8_*/float4_*): MLX has none, so the back
  // end stores them as bytes (backend/mlx/small_float.h).
  kF8E4M3FN, kF8E5M2, kF8E4M3, kF8E3M4, kF8E4M3FNUZ, kF8E5M2FNUZ,
  kF8E4M3B11FNUZ, kF8E8M0FNU, kF4E2M1FN,
  // 2-bit integers, stored as s4/u4 are (appended: plans store DType values).
  kS2, kU2,
};

// "f32", "bf16", "s32", "u8", "pred", "c64", ... (XLA spelling).
std::string_view dtype_name(DType t);
// Parses XLA spelling and MLIR spelling ("i1", "i32", "ui8", "complex<f32>").
// Returns kInvalid when unknown.
DType parse_dtype(std::string_view s);
// Bytes per element, in host buffers and in MLX arrays alike: 1 for pred,
// 0 for token, and 1 for s2/u2/s4/u4, which live one value per byte. jaxlib hands
// PJRT int4 arrays as ml_dtypes stores them, the value in a byte's low nibble
// (s4 -2 is 0x0e), and MLX has no 4-bit type (backend/mlx/dtype.h keeps s4
// sign-extended there). So byte_size() of s4[5] is 5, not XLA's packed 3.
// f4E2M1FN is stored the same way: one value per byte, in the low nibble.
int64_t dtype_size(DType t);
bool is_float(DType t);       // f16 bf16 f32 f64 (what MLX computes in)
// The 8- and 4-bit float types: no MLX dtype, stored as bytes.
bool is_small_float(DType t);
bool is_complex(DType t);     // c64 c128
bool is_signed_int(DType t);  // s2, s4, s8..s64
bool is_unsigned_int(DType t);// u2, u4, u8..u64
inline bool is_integer(DType t) { return is_signed_int(t) || is_unsigned_int(t); }
// Value bits: 1 for pred, 2 for s2/u2 and 4 for s4/u4 (each still stored
// in one byte).
int dtype_bits(DType t);
// s2/u2/s4/u4: integers narrower than a byte, one value per byte.
inline bool is_subbyte_int(DType t) {
  return t == DType::kS4 || t == DType::kU4 || t == DType::kS2 || t == DType::kU2;
}

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::kInvalid;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t num_elements() const;
  int64_t byte_size() const { return num_elements() * dtype_size(dtype); }
  bool operator==(const TensorType&) const = default;
  // "f32[2,3]"
  std::string str() const;
};

}  // namespace pjrtx::compiler
