#include "compiler/types.h"

#include <array>
#include <cstdint>

namespace pjrtx::compiler {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  const char* mlir;
  int bits;
};
constexpr std::array<DTypeInfo, 30> kInfo = {{
    {DType::kInvalid, "invalid", "", 0},
    {DType::kPred, "pred", "i1", 8},
    {DType::kS8, "s8", "i8", 8},
    {DType::kS16, "s16", "i16", 16},
    {DType::kS32, "s32", "i32", 32},
    {DType::kS64, "s64", "i64", 64},
    {DType::kU8, "u8", "ui8", 8},
    {DType::kU16, "u16", "ui16", 16},
    {DType::kU32, "u32", "ui32", 32},
    {DType::kU64, "u64", "ui64", 64},
    {DType::kF16, "f16", "f16", 16},
    {DType::kBF16, "bf16", "bf16", 16},
    {DType::kF32, "f32", "f32", 32},
    {DType::kF64, "f64", "f64", 64},
    {DType::kC64, "c64", "complex<f32>", 64},
    {DType::kC128, "c128", "complex<f64>", 128},
    {DType::kToken, "token", "!stablehlo.token", 0},
    {DType::kS4, "s4", "i4", 4},
    {DType::kU4, "u4", "ui4", 4},
    {DType::kF8E4M3FN, "f8e4m3fn", "f8E4M3FN", 8},
    {DType::kF8E5M2, "f8e5m2", "f8E5M2", 8},
    {DType::kF8E4M3, "f8e4m3", "f8E4M3", 8},
    {DType::kF8E3M4, "f8e3m4", "f8E3M4", 8},
    {DType::kF8E4M3FNUZ, "f8e4m3fnuz", "f8E4M3FNUZ", 8},
    {DType::kF8E5M2FNUZ, "f8e5m2fnuz", "f8E5M2FNUZ", 8},
    {DType::kF8E4M3B11FNUZ, "f8e4m3b11fnuz", "f8E4M3B11FNUZ", 8},
    {DType::kF8E8M0FNU, "f8e8m0fnu", "f8E8M0FNU", 8},
    {DType::kF4E2M1FN, "f4e2m1fn", "f4E2M1FN", 4},
    {DType::kS2, "s2", "i2", 2},
    {DType::kU2, "u2", "ui2", 2},
}};
const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }

DType parse_dtype(std::string_view s) {
  for (const auto& i : kInfo) {
    if (i.type == DType::kInvalid) continue;
    if (s == i.name || s == i.mlir) return i.type;
  }
  if (s == "bool") return DType::kPred;
  return DType::kInvalid;
}

int dtype_bits(DType t) { return t == DType::kPred ? 1 : info(t).bits; }
int64_t dtype_size(DType t) {
  return is_subbyte_int(t) || t == DType::kF4E2M1FN ? 1 : info(t).bits / 8;
}

bool is_float(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 ||
         t == DType::kF64;
}
bool is_small_float(DType t) {
  return t >= DType::kF8E4M3FN && t <= DType::kF4E2M1FN;
}
bool is_complex(DType t) { return t == DType::kC64 || t == DType::kC128; }
bool is_signed_int(DType t) {
  return t == DType::kS2 || t == DType::kS4 || t == DType::kS8 || t == DType::kS16 || t == DType::kS32 ||
         t == DType::kS64;
}
bool is_unsigned_int(DType t) {
  return t == DType::kU2 || t == DType::kU4 || t == DType::kU8 || t == DType::kU16 || t == DType::kU32 ||
         t == DType::kU64;
}

int64_t TensorType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s(dtype_name(dtype));
  s += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

}  // namespace pjrtx::compiler
