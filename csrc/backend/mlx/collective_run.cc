#include "backend/mlx/collective_run.h"

#include <cstdint>
#include <thread>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "backend/mlx/process_group.h"
#include "backend/mlx/transfer.h"
#include "common/error.h"

namespace pjrtx::backend {

namespace {
// Runs an exchange between processes on a thread of its own and waits for
// it at most `timeout`: a peer that is alive but stuck would otherwise hold
// this device (and the run) inside MLX's transport forever. On timeout the
// thread is left behind (MLX gives no way to cancel it) and the run fails.
template <typename F>
auto bounded(std::chrono::milliseconds timeout, const std::string& op, F&& fn)
    -> decltype(fn()) {
  using R = decltype(fn());
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<R> value;
    std::exception_ptr error;
  };
  auto sh = std::make_shared<Shared>();
  std::thread([sh, fn = std::forward<F>(fn)]() mutable {
    std::optional<R> v;
    std::exception_ptr err;
    try {
      v = fn();
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->value = std::move(v);
    sh->error = err;
    sh->done = true;
    sh->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(sh->mu);
  if (!sh->cv.wait_for(lock, timeout, [&] { return sh->done; }))
    throw Error(ErrorCode::kDeadlineExceeded,
                "the other processes did not complete the exchange within " +
                    std::to_string(timeout.count() / 1000) +
                    " s (PJRTX_COLLECTIVE_TIMEOUT_S; is one of them stuck?)");
  if (sh->error) std::rethrow_exception(sh->error);
  return std::move(*sh->value);
}
}  // namespace

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

template <typename Take>
auto CollectiveRun::world_round(int64_t seq, int me, Arrays mine, const std::string& op,
                                const CrossFn& cross, const StoreFn& store, Take take)
    -> decltype(take(std::declval<World&>())) {
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
    std::vector<Arrays> got;
    std::string failure;
    try {
      got = bounded(timeout_, op, [local, cross] { return cross(local); });
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
    store(ww, std::move(got));
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
  auto out = take(s);
  if (++s.taken == L.local.size()) world_.erase(seq);
  return out;
}

std::vector<Arrays> CollectiveRun::exchange_processes(int64_t seq, const std::vector<int>& group,
                                                      int me, Arrays mine,
                                                      const std::string& op) {
  const std::vector<int>& rows = layout_->rows;
  return world_round(
      seq, me, std::move(mine), op,
      [](const std::vector<Arrays>& local) { return gather_from_processes(local); },
      [&rows](World& w, std::vector<Arrays> got) {
        for (size_t r = 0; r < got.size() && r < rows.size(); ++r)
          if (!w.parts[rows[r]]) w.parts[rows[r]] = std::move(got[r]);
      },
      [&group](World& w) {
        std::vector<Arrays> all;
        all.reserve(group.size());
        for (int m : group) all.push_back(*w.parts.at(m));
        return all;
      });
}

Arrays CollectiveRun::shared_exchange(
    int64_t seq, int me, Arrays mine, const std::string& op,
    const std::function<Arrays(const std::vector<Arrays>&)>& cross) {
  const size_t n_local = layout_->local.size();
  return world_round(
      seq, me, std::move(mine), op,
      [cross](const std::vector<Arrays>& local) { return std::vector<Arrays>{cross(local)}; },
      [](World& w, std::vector<Arrays> got) { w.shared = std::move(got.front()); },
      [n_local](World& w) {
        Arrays out = w.shared;
        // One result for this process's devices: each takes a copy in
        // storage of its own (buffers of two devices never share it), but
        // a lone device keeps it.
        if (n_local > 1)
          for (auto& a : out) a = own_copy(a);
        return out;
      });
}

Arrays CollectiveRun::reduce_processes(
    int64_t seq, int me, Arrays mine, ProcessReduce kind,
    const std::function<mx::array(const mx::array&, const mx::array&)>& fold,
    const std::string& op) {
  return shared_exchange(seq, me, std::move(mine), op, [fold, kind](const std::vector<Arrays>& local) {
    Arrays reduced;
    for (size_t j = 0; j < local.front().size(); ++j) {
      mx::array acc = local.front()[j];
      for (size_t k = 1; k < local.size(); ++k) acc = fold(acc, local[k][j]);
      reduced.push_back(reduce_across_processes(acc, kind));
    }
    return reduced;
  });
}

Arrays CollectiveRun::gather_processes(int64_t seq, const std::vector<int>& group, int me,
                                       Arrays mine, const std::string& op) {
  if (group != layout_->rows) {
    std::vector<Arrays> all = exchange_processes(seq, group, me, std::move(mine), op);
    Arrays out;
    for (size_t j = 0; j < all.front().size(); ++j) {
      Arrays parts;
      for (const auto& m : all) parts.push_back(m[j]);
      out.push_back(mx::concatenate(parts, 0));
    }
    return out;
  }
  return shared_exchange(seq, me, std::move(mine), op, [](const std::vector<Arrays>& local) {
    Arrays stacked = gather_stacked_from_processes(local);
    Arrays out;
    for (auto& a : stacked) {
      // [rows, d0, ...] -> [rows * d0, ...]: a view of the gathered bytes.
      mx::Shape shape(a.shape().begin() + 1, a.shape().end());
      if (shape.empty()) shape.push_back(1);
      shape[0] *= a.shape(0);
      out.push_back(mx::reshape(a, shape, mx::Device(mx::Device::cpu)));
    }
    mx::eval(out);
    return out;
  });
}

void CollectiveRun::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) aborted_ = why;
  cv_.notify_all();
}

}  // namespace pjrtx::backend
