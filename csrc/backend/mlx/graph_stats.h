// How many MLX primitives a run evaluates: on Metal each one left unfused is
// a kernel launch, so jax_smoke/bench.py compares this count with the same
// model written in MLX, and PJRTX_TRACE=1 prints it per execute (prims=N).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "backend/mlx/arrays.h"

namespace pjrtx::backend {

// Counting walks the graph before each evaluation, so it is off unless
// PJRTX_TRACE=1 or set_count_primitives(true) (pjrtx._pjrtx.count_primitives).
void set_count_primitives(bool on);
bool counting_primitives();

// Called just before evaluating `outputs`: adds the distinct primitives in
// their graph that are not yet scheduled (what this evaluation runs; a
// multi-output primitive counts once).
void note_eval(const Arrays& outputs);

// Primitives noted on this process since it started (while counting was on).
int64_t primitives_evaluated();

// The same count by primitive name (MLX's Primitive::name(): "Add",
// "Compiled", "Matmul", ...), to see what a program's count is made of.
std::map<std::string, int64_t> primitive_histogram();
void reset_primitive_histogram();

}  // namespace pjrtx::backend
