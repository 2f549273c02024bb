#include "backend/mlx/graph_stats.h"

#include <atomic>
#include <unordered_set>
#include <vector>

#include "runtime/profile.h"
#include "runtime/trace.h"

namespace pjrtx::backend {

namespace {
std::atomic<bool> g_on{false};
std::atomic<int64_t> g_primitives{0};
}  // namespace

void set_count_primitives(bool on) { g_on = on; }

bool counting_primitives() { return g_on || runtime::trace_enabled() || runtime::profile_enabled(); }

void note_eval(const Arrays& outputs) {
  if (!counting_primitives()) return;
  std::unordered_set<std::uintptr_t> seen_arrays;
  std::vector<mx::array> stack(outputs.begin(), outputs.end());
  int64_t n = 0;
  while (!stack.empty()) {
    mx::array a = std::move(stack.back());
    stack.pop_back();
    // Evaluated or already scheduled arrays (inputs, constants, earlier
    // evaluations) cost this evaluation nothing.
    if (!a.has_primitive() || a.status() != mx::array::Status::unscheduled) continue;
    if (!seen_arrays.insert(a.id()).second) continue;
    // One node per primitive application: a multi-output node's siblings
    // count with it. (Not by primitive object: mx::compile's replays of a
    // fused kernel share one, e.g. every iteration of a compiled loop body.)
    for (const auto& s : a.siblings()) seen_arrays.insert(s.id());
    ++n;
    for (const auto& in : a.inputs()) stack.push_back(in);
  }
  g_primitives += n;
}

int64_t primitives_evaluated() { return g_primitives.load(); }

}  // namespace pjrtx::backend
