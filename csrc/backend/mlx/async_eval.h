// Evaluation that returns at once (mx::async_eval) and a handle that waits
// for it on any thread. The executor builds call N+1's graph while MLX's
// stream runs call N; the runtime's completion thread waits on the handle
// and then marks the outputs ready, in the order calls were made.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/mlx/arrays.h"

namespace pjrtx::backend {

class PendingEval {
 public:
  // Blocks until every array handed to eval_async is computed and rethrows
  // an error MLX recorded for the evaluation. Safe off the executor.
  void wait();
  // Whether the evaluation has finished (wait() would not block). Polls
  // MLX's completion event; on the thread that may call wait().
  bool ready() const;
  // Whether MLX was handed any work: false when every array was already
  // computed (a program the host forms ran whole, or one that returns its
  // inputs), and the evaluation is ready at once.
  bool queued() const { return done_ != nullptr; }

 private:
  friend PendingEval eval_async(const Arrays& arrays);
  // A node that depends on every evaluated array and that nothing else
  // references: waiting on it from another thread races with nobody, while
  // the outputs themselves stay the executor's to read and update (MLX
  // changes an array's status and event when a later graph reads it).
  // (mx::Event's own wait is not exported from libmlx on Linux.)
  std::shared_ptr<mx::array> done_;
};

// Call on the executor: schedules `arrays` (and what they depend on).
PendingEval eval_async(const Arrays& arrays);

// Call on the executor after eval_async, on MLX's CPU device only: queues
// behind the work scheduled so far a task that keeps the default CPU
// stream's thread polling for up to `us` microseconds, until the next
// eval_async has queued its kernels behind it. MLX's stream thread
// otherwise parks on a condition variable once its queue drains, and
// waking it costs 10-20 us on a VM: more than a small call's whole work.
void keep_cpu_stream_warm(int64_t us);

// Call on the executor: evaluates `arrays` now (a loop predicate, a trip
// count, a branch index) and counts their primitives. It polls for the
// result before blocking and keeps MLX's CPU stream warm for the next
// evaluation: a while loop syncs the host every iteration or block, and
// two thread wake-ups per sync were most of a small loop's time.
void eval_now(const Arrays& arrays);

}  // namespace pjrtx::backend
