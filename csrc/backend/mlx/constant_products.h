// XLA's algebraic simplifier rewrites (A * C1) * C2, with C1 and C2
// constants (scalars, splats, broadcasts of a scalar; either operand
// order), into A * (C1 * C2), the constants multiplied once at compile
// time. In float arithmetic that is another rounding: measured on 100,000
// random f32 x, XLA:CPU's (0.1 * x) * 0.3 equals x * fl(0.1 * 0.3) in all
// of them and the program's own order in 71%. Every XLA backend runs the
// rule, so JAX programs that scale twice (`c1 * (c2 * x)`, and every
// gradient of one: a transpose multiplies the cotangent by each constant in
// turn) round differently on pjrtx unless it rewrites them as XLA does. The
// rewrite also decides which multiply-adds XLA:CPU contracts
// (fma_contract.h): for matyas' gradient, 0.48 * (-1 * y) + 0.26 * (2 * x),
// XLA sees y * -0.48 + x * 0.52 and fuses the left product; without the
// rewrite pjrtx fused the right one, and JAX's L-BFGS on matyas stopped at
// 2e-5 instead of converging (upstream scipy_optimize_test's
// TestLBFGS::test_minimize3).
//
// Only real floats of 32 and 64 bits (integer products are exact modulo
// their width either way; small floats are widened first, widen.h), only
// splat constants (XLA also folds two dense array constants), and constants
// that are themselves products or negations of constants count as their
// folded value, as XLA's constant folding makes them.
#pragma once

#include <memory>

#include "compiler/plan.h"

namespace pjrtx::backend {

// The plan itself when nothing matches, else a rewritten copy.
std::shared_ptr<const compiler::Plan> fold_constant_products(std::shared_ptr<const compiler::Plan> plan);

}  // namespace pjrtx::backend
