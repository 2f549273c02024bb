// Small values on the host. A while loop whose trip count is data-dependent
// (a checkpointed loop, a sampler's tree building) carries its bookkeeping
// in scalars and tiny vectors: counters, flags, where-chains. Each such op
// is an MLX primitive per iteration, and they were most of an iteration's
// primitives (equinox's checkpointed while loop: ~85 of 99). Inside a
// general while loop (RunState::host_small), an op whose operands are all
// computed, contiguous and at most kHostSmallMaxElements elements runs here
// instead: its result is a computed array (no graph node), so a loop
// predicate computed this way is read without waiting for MLX.
//
// Outside such loops, each straight-line segment has a host lane
// (region_program.h's RegionProgram::Lane): its steps with a host form
// whose inputs are computed when it runs go first, on the host, and the
// rest of the segment is traced as before. A sampler's while loop tests
// floats, so it waits for MLX every iteration, and its state comes back
// computed: the key's threefry rounds, the tree's counters and the bits of
// each uniform draw then run here (NumPyro's NUTS: 985,000 MLX primitives
// per 400 samples before, 280,000 after). A call of a function that holds
// such work (jax.random's _uniform, _normal) gets a segment of its own,
// so its body is split the same way rather than traced whole.
//
// Only ops whose answer is defined bit for bit run here, so a value gets
// the same bits whichever side computes it (which side does can depend on
// whether an input has finished computing): integer and pred element-wise
// ops (loops/host_fold.h's host_int), data movement of any type (select,
// broadcast_in_dim, reshape, iota, bitcast_convert), integer and pred
// reductions, and f32/f64 arithmetic with one IEEE answer (+ - * /, sqrt,
// compares, converts, XLA's max/min, reductions whose order cannot show).
// With those, a sampler's whole step on a few floats can stay here (NumPyro's
// ESS: 1.05 million MLX primitives per 1,000 steps before, 170,000 after).
// Transcendental functions (exp, log, tanh) and longer float sums stay with
// MLX: their rounding is each library's own. PJRTX_HOST=int keeps float
// arithmetic on MLX, =off everything.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/mlx/host/host_int.h"

#include "backend/mlx/region_program.h"

namespace pjrtx::backend {

constexpr int64_t kHostSmallMaxElements = 64;

// The host form of `inst` (HostForm, region_program.h), or an empty
// function when it has none. It returns false, writing nothing, when an
// operand is not computed yet, not contiguous or too large.
// `floats`: f32/f64 arithmetic too (PJRTX_HOST=all), else only the exact
// integer, pred and data-movement forms (PJRTX_HOST=int).
HostForm host_small_kernel(const compiler::Plan& plan, const compiler::Instruction& inst,
                           bool floats = true);

// Whether every instruction of function `name` has a host form (or is a
// constant, or a call of such a function): JAX's private helpers
// (remainder, _where, threefry2x32, ...). A call of it computes on the host
// step by step when its operands are host values.
bool host_function(const compiler::Plan& plan, const std::string& name, bool floats = true);

// For a call of JAX's threefry2x32 helper (a function named threefry2x32*
// taking key words and counts of u32, returning two u32 arrays of the
// counts' shape): the 20 rounds in one host function instead of ~120 host
// steps. The name is only a hint: Lowerer checks the form against the
// callee's own steps on sample inputs before using it (program.cc).
HostForm threefry2x32_call(const compiler::Plan& plan, const compiler::Instruction& call);

// Whether a host form can read `a`: computed (not a trace placeholder),
// row contiguous and at most kHostSmallMaxElements elements.
bool host_readable(const mx::array& a);

// The elements of a computed, contiguous integer or bool array of at most
// kHostSmallMaxElements elements, widened exactly (nullopt otherwise).
std::optional<std::vector<Int128>> computed_ints(const mx::array& a);

// The value of a computed scalar of an integer or bool type without
// building a node (nullopt when it is not computed yet or of another type).
std::optional<int64_t> computed_int(const mx::array& a);

}  // namespace pjrtx::backend
