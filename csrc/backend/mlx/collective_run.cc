#include "backend/mlx/collective_run.h"

#include <cstdint>
#include <mlx/transforms.h>

#include "backend/mlx/process_group.h"
#include "common/error.h"

namespace pjrtx::backend {

std::vector<Arrays> CollectiveRun::exchange(int64_t seq, const std::vector<int>& group, int me,
                                            Arrays mine, const std::string& op) {
  size_t pos = group.size();
  for (size_t i = 0; i < group.size(); ++i)
    if (group[i] == me) pos = i;
  if (pos == group.size())
    throw Error(ErrorCode::kInternal, "[" + op + "] pjrtx: device " + std::to_string(me) +
                                          " is not in its own group");
  if (layout_) return exchange_processes(seq, group, me, std::move(mine), op);
  // Evaluated on this device's thread and stream before anyone else reads
  // them: other devices only ever see finished arrays.
  mx::eval(mine);
  const auto key = std::make_pair(seq, group.front());
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) throw Error(ErrorCode::kAborted, *aborted_);
  Slot& slot = slots_[key];
  if (slot.parts.empty()) slot.parts.resize(group.size());
  slot.parts[pos] = std::move(mine);
  ++slot.arrived;
  if (slot.arrived == group.size()) cv_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  bool done = cv_.wait_until(lock, deadline, [&] {
    return aborted_.has_value() || slots_.at(key).arrived == group.size();
  });
  if (aborted_) throw Error(ErrorCode::kAborted, *aborted_);
  if (!done) {
    std::string why = "[" + op + "] pjrtx: device " + std::to_string(me) + " waited " +
                      std::to_string(timeout_.count() / 1000) + " s for the other " +
                      std::to_string(group.size() - 1) +
                      " devices of its group (PJRTX_COLLECTIVE_TIMEOUT_S)";
    aborted_ = why;
    cv_.notify_all();
    throw Error(ErrorCode::kDeadlineExceeded, why);
  }
  Slot& s = slots_.at(key);
  std::vector<Arrays> all;
  all.reserve(group.size());
  for (auto& p : s.parts) all.push_back(*p);
  if (++s.taken == group.size()) slots_.erase(key);
  return all;
}

void CollectiveRun::span_processes(ProcessLayout layout) { layout_ = std::move(layout); }

void CollectiveRun::pass(int64_t seq, int me, const Arrays& mine, const std::string& op) {
  if (layout_) exchange_processes(seq, {me}, me, mine, op);
}

std::vector<Arrays> CollectiveRun::exchange_processes(int64_t seq, const std::vector<int>& group,
                                                      int me, Arrays mine,
                                                      const std::string& op) {
  mx::eval(mine);
  const ProcessLayout& L = *layout_;
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) throw Error(ErrorCode::kAborted, *aborted_);
  World& w = world_[seq];
  if (w.parts.empty()) w.parts.resize(L.num_logical);
  w.parts[me] = std::move(mine);
  if (++w.posted == L.local.size()) {
    // The last of this process's devices to arrive moves the bytes; the
    // others wait below. Exchanges happen one at a time and in the same
    // order in every process (runs are posted in one order, collectives
    // come in program order).
    std::vector<Arrays> local;
    for (int i : L.local) local.push_back(*w.parts[i]);
    lock.unlock();
    std::vector<Arrays> rows;
    std::string failure;
    try {
      rows = gather_from_processes(local);
    } catch (const std::exception& e) {
      failure = "[" + op + "] pjrtx: the exchange with the other processes failed: " + e.what();
    }
    lock.lock();
    if (!failure.empty()) {
      if (!aborted_) aborted_ = failure;
      cv_.notify_all();
      throw Error(ErrorCode::kUnavailable, failure);
    }
    World& ww = world_.at(seq);
    for (size_t r = 0; r < rows.size() && r < L.rows.size(); ++r)
      if (!ww.parts[L.rows[r]]) ww.parts[L.rows[r]] = std::move(rows[r]);
    ww.ready = true;
    cv_.notify_all();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  bool done = cv_.wait_until(lock, deadline, [&] {
    return aborted_.has_value() || world_.at(seq).ready;
  });
  if (aborted_) throw Error(ErrorCode::kAborted, *aborted_);
  if (!done) {
    std::string why = "[" + op + "] pjrtx: device " + std::to_string(me) + " waited " +
                      std::to_string(timeout_.count() / 1000) +
                      " s for this process's other devices and the other processes "
                      "(PJRTX_COLLECTIVE_TIMEOUT_S)";
    aborted_ = why;
    cv_.notify_all();
    throw Error(ErrorCode::kDeadlineExceeded, why);
  }
  World& s = world_.at(seq);
  std::vector<Arrays> all;
  all.reserve(group.size());
  for (int m : group) all.push_back(*s.parts.at(m));
  if (++s.taken == L.local.size()) world_.erase(seq);
  return all;
}

void CollectiveRun::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) aborted_ = why;
  cv_.notify_all();
}

}  // namespace pjrtx::backend
