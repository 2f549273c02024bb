// Plan <-> bytes, so an executable can be written to JAX's persistent
// compilation cache and loaded in another process without running the
// Python frontend again. The format is ours, little-endian and explicit
// (no struct dumps): a magic, a format version, then the plan. Opcodes
// travel by name, so renumbering opcodes.h keeps old blobs readable.
//
// Reading never trusts the bytes: every length is checked against what is
// left, nesting is bounded, and anything malformed (truncated, garbled, an
// unknown opcode or dtype, dense data of the wrong size) throws an
// INVALID_ARGUMENT "pjrtx: serialized plan: ..." instead of crashing. The
// caller still verifies the plan (compiler::verify) before lowering it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/plan.h"

namespace pjrtx::compiler {

// Bumped whenever the encoding below changes.
// 2: entry shardings (arg_shardings, result_shardings) per function.
inline constexpr uint32_t kPlanFormatVersion = 2;

std::string serialize_plan(const Plan& plan);
Plan deserialize_plan(std::string_view bytes);

}  // namespace pjrtx::compiler
