#include "backend/mlx/async_eval.h"

#include <cstdint>
#include <mlx/device.h>
#include <mlx/ops.h>
#include <mlx/scheduler.h>
#include <mlx/transforms.h>

#include <atomic>

#include "backend/mlx/f64_scope.h"
#include "backend/mlx/graph_stats.h"
#include "common/spin.h"

namespace pjrtx::backend {

namespace {
// Bumped after every eval_async: a warm task polling it returns as soon as
// a newer evaluation has queued its kernels behind it.
std::atomic<uint64_t> g_evaluations{0};

bool all_available(const Arrays& arrays) {
  for (const auto& a : arrays)
    if (!a.is_available()) return false;
  return true;
}

}  // namespace

PendingEval eval_async(const Arrays& arrays) {
  note_eval(arrays);  // counts the run's own primitives, not the marker
  // Everything computed already (by the host forms, or earlier runs):
  // nothing to queue, and no round trip through MLX's stream thread for a
  // marker (~6 us of a tiny call).
  if (all_available(arrays)) return PendingEval{};
  CpuScope f64(arrays);  // a marker over f64 outputs cannot sit on a GPU stream
  // mx::depends forwards its first input's buffer (no kernel) once the
  // dependencies are computed.
  mx::array marker = mx::depends({mx::array(false)}, arrays)[0];
  Arrays all = arrays;
  all.push_back(marker);
  mx::async_eval(all);
  g_evaluations.fetch_add(1, std::memory_order_release);
  PendingEval p;
  p.done_ = std::make_shared<mx::array>(std::move(marker));
  return p;
}

void eval_now(const Arrays& arrays) {
  note_eval(arrays);
  const int64_t us = spin_us();
  if (us > 0 && !arrays.empty()) {
    mx::async_eval(arrays);
    g_evaluations.fetch_add(1, std::memory_order_release);
    if (mx::default_device() == mx::Device::cpu) keep_cpu_stream_warm(us);
    spin_until([&] { return all_available(arrays); }, us);
  }
  mx::eval(arrays);  // waits if still running, and reports MLX's errors
}

void keep_cpu_stream_warm(int64_t us) {
  if (us <= 0) return;
  const uint64_t seen = g_evaluations.load(std::memory_order_acquire);
  mx::scheduler::enqueue(mx::default_stream(mx::Device::cpu), [seen, us] {
    // MLX's eval waits for queued tasks to finish once about ten are
    // outstanding, and those wait behind this one: leave as soon as a new
    // task is counted, not only once the next evaluation has been queued
    // (a graph of 100+ kernels would otherwise stall here until the
    // deadline).
    const int active = mx::scheduler::n_active_tasks();
    spin_until([&] {
      return g_evaluations.load(std::memory_order_acquire) != seen ||
             mx::scheduler::n_active_tasks() > active;
    }, us);
  });
}

bool PendingEval::ready() const { return !done_ || done_->is_available(); }

void PendingEval::wait() {
  if (done_) done_->wait();
}

}  // namespace pjrtx::backend
