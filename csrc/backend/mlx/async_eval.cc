#include "backend/mlx/async_eval.h"

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "backend/mlx/graph_stats.h"

namespace pjrtx::backend {

PendingEval eval_async(const Arrays& arrays) {
  note_eval(arrays);  // counts the run's own primitives, not the marker
  // mx::depends forwards its first input's buffer (no kernel) once the
  // dependencies are computed.
  mx::array marker = mx::depends({mx::array(false)}, arrays)[0];
  Arrays all = arrays;
  all.push_back(marker);
  mx::async_eval(all);
  PendingEval p;
  p.done_ = std::make_shared<mx::array>(std::move(marker));
  return p;
}

void PendingEval::wait() {
  if (done_) done_->wait();
}

}  // namespace pjrtx::backend
