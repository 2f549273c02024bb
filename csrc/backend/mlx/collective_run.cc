#include "backend/mlx/collective_run.h"

#include <cstdint>
#include <mlx/transforms.h>

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

void CollectiveRun::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) aborted_ = why;
  cv_.notify_all();
}

}  // namespace pjrtx::backend
