// Plan -> text, for PJRTX_DUMP_DIR and debugging:
//   func @main(%0: f32[2,3]) -> (f32[3]) {
//     %1 = stablehlo.reduce(%0, %2) {dimensions=[0]} loc(...)
//       ^(%3: f32[], %4: f32[]) { ... return %5 }
//     return %1
//   }
#pragma once

#include <string>

#include "compiler/plan.h"

namespace pjrtx::compiler {

std::string print_plan(const Plan& plan);

}  // namespace pjrtx::compiler
