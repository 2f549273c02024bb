// Plugin_Initialize and Plugin_Attributes, plus the dtype mapping shared by
// the entry points.
#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <string>

#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"

namespace pjrtx::pjrt {

namespace {
// Without the attribute jaxlib targets StableHLO 1.13.7; Python raises it to
// jaxlib's own current version (our parser is jaxlib's).
std::array<int64_t, 3> g_stablehlo_version = {1, 13, 7};
}  // namespace

void set_stablehlo_current_version(int64_t major, int64_t minor, int64_t patch) {
  g_stablehlo_version = {major, minor, patch};
}

PJRT_Error* Plugin_Initialize(PJRT_Plugin_Initialize_Args* args) {
  return guard([&] { PJRTX_CHECK_ARGS(Plugin_Initialize); });
}

PJRT_Error* Plugin_Attributes(PJRT_Plugin_Attributes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Plugin_Attributes);
    // The attribute array must outlive the call; it is rebuilt only if the
    // version changed (Python sets it once, before the first client).
    static std::array<int64_t, 3> version;
    static PJRT_NamedValue attrs[1];
    static const char kName[] = "stablehlo_current_version";
    version = g_stablehlo_version;
    attrs[0] = PJRT_NamedValue{};
    attrs[0].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    attrs[0].name = kName;
    attrs[0].name_size = sizeof(kName) - 1;
    attrs[0].type = PJRT_NamedValue_kInt64List;
    attrs[0].int64_array_value = version.data();
    attrs[0].value_size = version.size();
    args->attributes = attrs;
    args->num_attributes = 1;
  });
}

PJRT_Buffer_Type to_pjrt_type(compiler::DType t) {
  using compiler::DType;
  switch (t) {
    case DType::kPred: return PJRT_Buffer_Type_PRED;
    case DType::kS8: return PJRT_Buffer_Type_S8;
    case DType::kS16: return PJRT_Buffer_Type_S16;
    case DType::kS32: return PJRT_Buffer_Type_S32;
    case DType::kS64: return PJRT_Buffer_Type_S64;
    case DType::kU8: return PJRT_Buffer_Type_U8;
    case DType::kU16: return PJRT_Buffer_Type_U16;
    case DType::kU32: return PJRT_Buffer_Type_U32;
    case DType::kU64: return PJRT_Buffer_Type_U64;
    case DType::kF16: return PJRT_Buffer_Type_F16;
    case DType::kBF16: return PJRT_Buffer_Type_BF16;
    case DType::kF32: return PJRT_Buffer_Type_F32;
    case DType::kF64: return PJRT_Buffer_Type_F64;
    case DType::kC64: return PJRT_Buffer_Type_C64;
    case DType::kC128: return PJRT_Buffer_Type_C128;
    case DType::kToken: return PJRT_Buffer_Type_TOKEN;
    case DType::kS2: return PJRT_Buffer_Type_S2;
    case DType::kU2: return PJRT_Buffer_Type_U2;
    case DType::kS4: return PJRT_Buffer_Type_S4;
    case DType::kU4: return PJRT_Buffer_Type_U4;
    case DType::kF8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case DType::kF8E5M2: return PJRT_Buffer_Type_F8E5M2;
    case DType::kF8E4M3: return PJRT_Buffer_Type_F8E4M3;
    case DType::kF8E3M4: return PJRT_Buffer_Type_F8E3M4;
    case DType::kF8E4M3FNUZ: return PJRT_Buffer_Type_F8E4M3FNUZ;
    case DType::kF8E5M2FNUZ: return PJRT_Buffer_Type_F8E5M2FNUZ;
    case DType::kF8E4M3B11FNUZ: return PJRT_Buffer_Type_F8E4M3B11FNUZ;
    case DType::kF8E8M0FNU: return PJRT_Buffer_Type_F8E8M0FNU;
    case DType::kF4E2M1FN: return PJRT_Buffer_Type_F4E2M1FN;
    default: return PJRT_Buffer_Type_INVALID;
  }
}

compiler::DType from_pjrt_type(PJRT_Buffer_Type t) {
  using compiler::DType;
  switch (t) {
    case PJRT_Buffer_Type_PRED: return DType::kPred;
    case PJRT_Buffer_Type_S8: return DType::kS8;
    case PJRT_Buffer_Type_S16: return DType::kS16;
    case PJRT_Buffer_Type_S32: return DType::kS32;
    case PJRT_Buffer_Type_S64: return DType::kS64;
    case PJRT_Buffer_Type_U8: return DType::kU8;
    case PJRT_Buffer_Type_U16: return DType::kU16;
    case PJRT_Buffer_Type_U32: return DType::kU32;
    case PJRT_Buffer_Type_U64: return DType::kU64;
    case PJRT_Buffer_Type_F16: return DType::kF16;
    case PJRT_Buffer_Type_BF16: return DType::kBF16;
    case PJRT_Buffer_Type_F32: return DType::kF32;
    case PJRT_Buffer_Type_F64: return DType::kF64;
    case PJRT_Buffer_Type_C64: return DType::kC64;
    case PJRT_Buffer_Type_C128: return DType::kC128;
    case PJRT_Buffer_Type_S2: return DType::kS2;
    case PJRT_Buffer_Type_U2: return DType::kU2;
    case PJRT_Buffer_Type_S4: return DType::kS4;
    case PJRT_Buffer_Type_U4: return DType::kU4;
    case PJRT_Buffer_Type_F8E4M3FN: return DType::kF8E4M3FN;
    case PJRT_Buffer_Type_F8E5M2: return DType::kF8E5M2;
    case PJRT_Buffer_Type_F8E4M3: return DType::kF8E4M3;
    case PJRT_Buffer_Type_F8E3M4: return DType::kF8E3M4;
    case PJRT_Buffer_Type_F8E4M3FNUZ: return DType::kF8E4M3FNUZ;
    case PJRT_Buffer_Type_F8E5M2FNUZ: return DType::kF8E5M2FNUZ;
    case PJRT_Buffer_Type_F8E4M3B11FNUZ: return DType::kF8E4M3B11FNUZ;
    case PJRT_Buffer_Type_F8E8M0FNU: return DType::kF8E8M0FNU;
    case PJRT_Buffer_Type_F4E2M1FN: return DType::kF4E2M1FN;
    default: {
      // Name the type as XLA spells it: "element type 15" means nothing to
      // someone who passed a complex128 array.
      static const char* const kNames[] = {
          "invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
          "f16", "f32", "f64", "bf16", "c64", "c128", "f8e5m2", "f8e4m3fn",
          "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "s4", "u4", "token", "s2", "u2",
          "f8e4m3", "f8e3m4", "f8e8m0fnu", "f4e2m1fn", "s1", "u1"};
      int i = static_cast<int>(t);
      std::string name = i >= 0 && i < static_cast<int>(std::size(kNames))
                             ? std::string(kNames[i])
                             : "PJRT element type " + std::to_string(i);
      unimplemented("pjrtx: element type ", name,
                    " is not supported on MLX (supported: pred, s2, s4, s8-s64, u2, u4, u8-u64, f16, bf16, "
                    "f32, f64, c64, c128, f8e4m3fn, f8e5m2, f8e4m3, f8e3m4, f8e4m3fnuz, f8e5m2fnuz, "
                    "f8e4m3b11fnuz, f8e8m0fnu, f4e2m1fn)");
    }
  }
}

}  // namespace pjrtx::pjrt
