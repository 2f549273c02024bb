// A stablehlo.while of the plan as one C++ function, for the host loop
// engine (loops/host_loop.h): the loop state lives in statically shaped
// buffers, each plan op becomes a few scalar statements over them, nested
// while/case/if/func.call become C++ control flow, and the whole loop runs
// as machine code built by the system compiler (loops/cxx_build.h). The op
// semantics are StableHLO's as XLA:CPU computes them (integer division by
// zero, shift counts past the width, float -> int saturation, NaN-propagating
// max/min, clamped dynamic_slice starts, dropped scatter windows), held to
// XLA:CPU by tests/test_host_loops.py.
//
//   std::string why;
//   std::optional<LoopSource> src = emit_loop(plan, while_inst, &why);
//   // src->code: C++ that, after kCxxPrelude (loops/cxx_prelude.h),
//   // defines extern "C" src->symbol:
//   //   void symbol(const void* const* inputs, void* const* outputs);
//   // inputs: the while's operands, then src->captured (values the regions
//   // read from outside), each row-major and contiguous; outputs: the
//   // while's results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/mlx/loops/loop_source.h"
#include "compiler/plan.h"

namespace pjrtx::backend::loops {

// The loop as C++, or nullopt with `why` naming the first op, type or
// attribute the engine does not take ("stablehlo.custom_call at loc(...)").
std::optional<LoopSource> emit_loop(const compiler::Plan& plan, const compiler::Instruction& loop,
                                    std::string* why);

}  // namespace pjrtx::backend::loops
