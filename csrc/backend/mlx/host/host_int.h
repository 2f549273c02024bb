// StableHLO's integer and pred element-wise ops on host values, one element
// at a time, exactly as the lowerings compute them on MLX: two's complement
// wrap, x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN and
// INT_MIN % -1 = 0, shift counts outside [0, bits) give 0 or the sign fill.
// Values are kept wrapped to their type, sign- or zero-extended; pred is 0
// or 1. Counted loops fold index arithmetic with it (loops/host_fold.h) and
// general loops compute their small values with it (host_small.h). The
// index-clamp rule lives here too: the indexing lowerings (ops/indexing.h)
// clamp on MLX by it, and the host tier and folding clamp host values by it.
#pragma once

#include <cstdint>

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

// The largest value of integer type t (INT64_MAX for 64-bit types).
int64_t type_max(compiler::DType t);
// StableHLO's start-index clamp for one index x of integer type t known on
// the host: clamped to [0, hi] (hi below 0 counts as 0) and narrowed to
// int32. Comparing in the index's own type keeps huge unsigned values from
// wrapping negative. ops/indexing.h's clamp_index computes the same on MLX.
int32_t clamp_index_value(Int128 x, compiler::DType t, int64_t hi);
}  // namespace host_int

}  // namespace pjrtx::backend
