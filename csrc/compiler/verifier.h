// Structural checks of a plan before any lowering: every value defined once
// and before use (regions may read values of enclosing regions), region
// counts per opcode, operand counts and shapes of elementwise ops, and
// function results against their declared types. Throws INVALID_ARGUMENT
// naming the op and location.
#pragma once

#include "compiler/plan.h"

namespace pjrtx::compiler {

void verify(const Plan& plan);

}  // namespace pjrtx::compiler
