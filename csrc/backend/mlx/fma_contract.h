// XLA:CPU contracts a float32 multiply into the add or subtract that is its
// only use: LLVM fuses `fadd (fmul a, b), c` into one FMA, so `a * b + c`
// rounds once there, on every CPU with FMA (x86-64 with FMA3, every arm64).
// Measured on 100,000 random triples: XLA:CPU's a*b+c, c+a*b, a*b-c and
// c-a*b equal fma(a, b, +-c) in all of them and the separately rounded
// result in 76%; a product that has a second use stays separate. A
// cancelling sum (a Lanczos series' 0.9189 + t * log(...), a Horner
// polynomial) then differs by several ulps between the two, which tests
// with rtol = 1e-5 on such sums can see (numpyro's TruncatedGamma).
//
// This pass makes the same contractions in the plan. Which pairs XLA fuses
// depends on its fusion: a product is fused into an add only where it is
// computed inside the add's fusion and read once there. So the pass models
// XLA:CPU's fusion of element-wise code, per region: common subexpressions
// merged and dead code dropped first (as XLA's passes do); a root for
// every value read whole (results, nested regions, ops that do not fuse
// their operands); every other value computed inside each fusion that
// reads it (duplicated); a root the program also computes on joining its
// readers' fusion (multi-output fusion) unless it is cheap to duplicate;
// and in a while body, values that do not change between iterations
// computed before the loop. Then LLVM's choice, after its canonical forms
// (-(-x) = x, (-a) + y = y - a, x - (-b) = x + b): the left operand when it
// is such a product, else the right, else in (-(a b)) - z the negated one.
// The result is fused_multiply_add(a, b, c), negations exact. Only for
// values of at most 4,096 elements: MLX has no FMA, and on bigger arrays our
// FMA node would split mx::compile's fused element-wise kernels (the bench's
// Adam update: 42 -> 204 primitives, 1.6x the time), so those keep
// separate roundings. It matches
// XLA:CPU bit for bit on 97-99% of random programs of shared and unshared
// products (tests/test_fma_contract.py); the misses are XLA fusing the
// right product where the left one was fusable too, and values XLA
// computes in two fusions and fuses in only one.
//
// Every consumer computes one rounding: the MLX lowering (ops/
// elementwise.cc, through float64), the host loop engine (m_fma) and the
// host forms (host/host_float.cc). The frontend keeps such pairs as they
// are (walker.py's rematerialisation would change their uses).
#pragma once

#include <memory>

#include "compiler/plan.h"

namespace pjrtx::backend {

// The plan itself when nothing contracts, else a rewritten copy.
std::shared_ptr<const compiler::Plan> contract_multiply_add(std::shared_ptr<const compiler::Plan> plan);

}  // namespace pjrtx::backend
