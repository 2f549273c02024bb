// StableHLO's integer and pred element-wise ops on host values, one element
// at a time, exactly as the lowerings compute them on MLX: two's complement
// wrap, x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN and
// INT_MIN % -1 = 0, shift counts outside [0, bits) give 0 or the sign fill.
// Values are kept wrapped to their type, sign- or zero-extended; pred is 0
// or 1. Counted loops fold index arithmetic with it (ops/host_fold.h) and
// general loops compute their small values with it (host_small.h).
#pragma once

#include "compiler/plan.h"

namespace pjrtx::backend {

using Int128 = __int128;

namespace host_int {
// pred, or an integer type of 8 to 64 bits.
bool int_type(compiler::DType t);
Int128 wrap(Int128 v, compiler::DType t);
// Whether `inst` is an element-wise op (add ... clamp, sign, compare,
// select, convert, shifts) on int_type operands and result that apply() computes.
bool elementwise(const compiler::Plan& plan, const compiler::Instruction& inst);
// One element of `inst`'s result from its operands' elements x[0..2].
Int128 apply(const compiler::Plan& plan, const compiler::Instruction& inst, const Int128* x);
}  // namespace host_int

}  // namespace pjrtx::backend
