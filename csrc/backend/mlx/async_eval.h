// Evaluation that returns at once (mx::async_eval) and a handle that waits
// for it on any thread. The executor builds call N+1's graph while MLX's
// stream runs call N; the runtime's completion thread waits on the handle
// and then marks the outputs ready, in the order calls were made.
#pragma once

#include <memory>

#include "backend/mlx/registry.h"

namespace pjrtx::backend {

class PendingEval {
 public:
  // Blocks until every array handed to eval_async is computed and rethrows
  // an error MLX recorded for the evaluation. Safe off the executor.
  void wait();

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

}  // namespace pjrtx::backend
