// The thread that owns one device's MLX work. MLX keeps its compile cache,
// default streams and command encoders per thread, so every graph build and
// evaluation of a device happens on its executor, in the order tasks were
// posted, and two devices' executors run on separate MLX streams.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <memory>

namespace pjrtx::backend {
struct DeviceChoice;
}

namespace pjrtx::runtime {

class Executor {
 public:
  // `index`: the device's place in its client (for thread names).
  Executor(const backend::DeviceChoice& device, int index = 0);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void post(std::function<void()> task);
  // Runs `task` on the completion thread, after every task completed before
  // it: an execute posts there the wait for its evaluation and the marking
  // of its outputs ready, so the executor is free to build the next call's
  // graph meanwhile, and outputs become ready in call order.
  void complete(std::function<void()> task);

  // Nothing queued on either thread: a run that ends now cannot overtake
  // an earlier one, and no task waits behind the executor. The executor
  // then waits for a short run itself and marks it ready (one thread hop
  // fewer than handing the wait to the completion thread).
  bool quiet();

  // Runs f on the executor and waits for its result (exceptions propagate).
  // Runs inline when already on the executor thread.
  template <typename F>
  auto run_sync(F&& f) -> decltype(f()) {
    if (on_executor_thread()) return f();
    std::packaged_task<decltype(f())()> task(std::forward<F>(f));
    auto fut = task.get_future();
    post([&task] { task(); });
    return fut.get();
  }

  bool on_executor_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  const backend::DeviceChoice& device() const { return *device_; }

 private:
  void loop(int index);
  void completion_loop(int index);

  std::unique_ptr<backend::DeviceChoice> device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  // tasks_.size() (and stop_ as one more), readable without the lock: the
  // executor polls it for a while before it blocks (common/spin.h).
  std::atomic<int> pending_{0};
  std::thread thread_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::deque<std::function<void()>> done_tasks_;
  bool done_stop_ = false;
  std::atomic<int> completions_in_flight_{0};
  std::thread done_thread_;
};

}  // namespace pjrtx::runtime
