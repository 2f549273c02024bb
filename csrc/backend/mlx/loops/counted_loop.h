// Counted loops: a stablehlo.while whose trip count follows from its entry
// state. JAX's fori_loop and scan (and many while_loops) compare a
// loop-carried integer counter with a bound and add a constant step to the
// counter in the body; such a loop can run its body N times without reading
// a predicate on the host every iteration (ops/control.cc).
//
// A wrong trip count is a silent wrong answer, so the match is strict
// (anything unusual keeps the general path) and the count is exact: it is
// computed in 128 bits and refused when the counter would wrap.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/mlx/host/host_int.h"
#include "backend/mlx/loops/loop_stats.h"
#include "backend/mlx/registry.h"

namespace pjrtx::backend {


// The comparison, normalised so the counter is on the left: `counter DIR bound`.
enum class LoopDir { kLT, kLE, kGT, kGE, kEQ, kNE };

// A loop-carried scalar integer that the body steps by a constant (the
// counter itself, fori_loop's `i`, ...): its value after k iterations is
// init + k * step, wrapped to its type, so the counted path hands the body a
// host scalar instead of evaluating the add in the graph.
struct Induction {
  size_t index = 0;  // in the loop state
  compiler::DType dtype = compiler::DType::kInvalid;
  Int128 step = 0;
  std::optional<Int128> init_constant;
};

struct CountedLoop {
  size_t counter = 0;  // index of the counter in the loop state
  compiler::DType dtype = compiler::DType::kInvalid;
  LoopDir dir = LoopDir::kLT;
  Int128 step = 0;  // what one iteration adds to the counter (negative: subtract)
  // Where the bound comes from; it never changes while the loop runs, so it
  // is read once per entry.
  enum class Bound { kConstant, kCarried, kCaptured } bound_kind = Bound::kConstant;
  Int128 bound_constant = 0;   // kConstant
  size_t bound_index = 0;      // kCarried: index in the loop state
  compiler::ValueId bound_value = -1;  // kCaptured: a value defined outside the loop
  std::optional<Int128> init_constant;  // the counter's entry value, when a constant
  std::vector<Induction> inductions;     // the counter and every other induction variable
};

// The counted form of the while being lowered (regions already lowered, so
// their constants are known), or nullopt when it is not one.
std::optional<CountedLoop> match_counted_loop(const LowerCtx& ctx);

// Iterations of `for (i = init; i DIR bound; i += step)` over `dtype`, or
// nullopt when the counter would leave the type's range (it would wrap, and
// the general path must decide) or never reach the bound.
std::optional<uint64_t> trip_count(LoopDir dir, Int128 init, Int128 bound, Int128 step,
                                   compiler::DType dtype);

// A scalar integer array's value, exactly (reads it on the host).
Int128 read_int(const mx::array& a, compiler::DType dtype);
// `v` wrapped to `dtype` (two's complement, as XLA's integer add) as a scalar.
mx::array wrapped_scalar(Int128 v, compiler::DType dtype);

}  // namespace pjrtx::backend
