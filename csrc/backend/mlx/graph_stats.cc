#include "backend/mlx/graph_stats.h"

#include <cstdint>
#include <mlx/primitives.h>

#include <atomic>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "common/profile.h"
#include "common/trace.h"

namespace pjrtx::backend {

namespace {
std::atomic<bool> g_on{false};
std::atomic<int64_t> g_primitives{0};
std::mutex g_histogram_mutex;
std::map<std::string, int64_t> g_histogram;
}  // namespace

void set_count_primitives(bool on) { g_on = on; }

bool counting_primitives() { return g_on || trace_enabled() || profile_enabled(); }

void note_eval(const Arrays& outputs) {
  if (!counting_primitives()) return;
  std::unordered_set<std::uintptr_t> seen_arrays;
  std::vector<mx::array> stack(outputs.begin(), outputs.end());
  int64_t n = 0;
  std::map<std::string, int64_t> names;
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
    ++names[a.primitive().name()];
    for (const auto& in : a.inputs()) stack.push_back(in);
  }
  g_primitives += n;
  std::lock_guard<std::mutex> lock(g_histogram_mutex);
  for (const auto& [name, count] : names) g_histogram[name] += count;
}

std::map<std::string, int64_t> primitive_histogram() {
  std::lock_guard<std::mutex> lock(g_histogram_mutex);
  return g_histogram;
}

void reset_primitive_histogram() {
  std::lock_guard<std::mutex> lock(g_histogram_mutex);
  g_histogram.clear();
}

int64_t primitives_evaluated() { return g_primitives.load(); }

}  // namespace pjrtx::backend
