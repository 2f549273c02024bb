// What the emitter hands the host loop engine: one loop as C++ source, its
// symbol and inputs, and the work that sets its placement (emit_cxx.h makes
// it, host_loop.cc builds and runs it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/plan.h"

namespace pjrtx::backend::loops {

// A host callback (custom_call @pjrtx_callback) the loop calls: the code
// calls it by its index in LoopSource::callbacks (host_loop.cc maps that to
// the callable), so the code does not depend on the callable's id and a
// second process builds the same source.
struct LoopCallback {
  uint64_t id = 0;
  bool effect = false;  // has_side_effect: io_callback, debug.callback
  std::vector<compiler::TensorType> args, results;
};

struct LoopSource {
  // Compiled after kCxxPrelude (and the linalg kernels' text, below,
  // which build_loop precompiles once).
  std::string code;
  std::string symbol;
  // Values the loop's regions read from the enclosing function, passed
  // after the operands.
  std::vector<compiler::ValueId> captured;
  // Per operand of the loop: true when its value is a constant splat
  // (a broadcast scalar constant, e.g. a vmapped counter's zeros) written
  // into the code; such operands are not passed.
  std::vector<bool> operand_in_code;
  // The host callbacks the code calls, in the order of their indices.
  std::vector<LoopCallback> callbacks;
  // The code calls host/linalg_kernels.h (cholesky, triangular_solve): it
  // is built after that header's text too. Other loops' prelude leaves it
  // out: its <complex> and <vector> are what a build would parse, and it
  // is the one prelude kept precompiled.
  bool linalg = false;
  // Per-iteration work of the condition and body: elements their ops write,
  // plus multiply-adds of dots and comparisons of sorts (placement.h).
  int64_t work = 0;
  // Instructions in the condition and body, nested regions included.
  int64_t ops = 0;
};

}  // namespace pjrtx::backend::loops
