// Process-wide counters of how while loops ran, for tests and tracing
// (pjrtx._pjrtx.loop_stats). Counted and general loops (ops/control.cc) and
// host steps (RegionProgram's run, program.cc) add to them, so they sit on
// a floor below both.
#pragma once

#include <cstdint>

namespace pjrtx::backend {

struct LoopStats {
  int64_t counted_runs = 0;        // loop entries that ran counted
  int64_t counted_iterations = 0;  // body runs on the counted path
  int64_t general_runs = 0;        // loop entries on the general path
  int64_t general_iterations = 0;  // body runs on the general path
  int64_t folded_iterations = 0;   // counted iterations with host-folded index arithmetic
  int64_t host_steps = 0;          // steps computed on host values (host/host_small.h)
};
LoopStats loop_stats();
void record_loop(bool counted, int64_t iterations);
void record_folded(int64_t iterations);
void record_host_step();

}  // namespace pjrtx::backend
