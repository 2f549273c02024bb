#include "runtime/executor.h"


#include "backend/mlx/async_eval.h"
#include "backend/mlx/mlx_device.h"
#include "backend/mlx/host_callback.h"
#include "common/error.h"
#include "common/profile.h"
#include "common/spin.h"

#include <chrono>
#include <cstdio>

namespace pjrtx::runtime {

Executor::Executor(const backend::DeviceChoice& device, int index)
    : device_(std::make_unique<backend::DeviceChoice>(device)) {
  spin_us();  // reads and checks PJRTX_SPIN_US before any thread polls with it
  thread_ = std::thread([this, index] { loop(index); });
  done_thread_ = std::thread([this, index] { completion_loop(index); });
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    pending_.fetch_add(1);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Every execute has posted its completion by now: drain them.
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_stop_ = true;
  }
  done_cv_.notify_all();
  if (done_thread_.joinable()) done_thread_.join();
}

bool Executor::quiet() {
  if (completions_in_flight_.load() != 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.empty();
}

void Executor::complete(std::function<void()> task) {
  completions_in_flight_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_tasks_.push_back(std::move(task));
  }
  done_cv_.notify_one();
}

void Executor::completion_loop(int index) {
  profile_thread_name(index == 0 ? std::string("pjrtx completion")
                                 : "pjrtx completion " + std::to_string(index));
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(done_mu_);
      // A second with nothing to complete: runs have paused, so memory
      // they freed can go back to the system.
      while (!done_cv_.wait_for(lock, std::chrono::seconds(1),
                                [&] { return done_stop_ || !done_tasks_.empty(); })) {
        lock.unlock();
        backend::release_freed_memory();
        lock.lock();
      }
      if (done_tasks_.empty()) return;
      task = std::move(done_tasks_.front());
      done_tasks_.pop_front();
    }
    try {
      task();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[pjrtx] internal error on the completion thread: %s\n", e.what());
    }
    completions_in_flight_.fetch_sub(1);
  }
}

void Executor::post(std::function<void()> task) {
  // A host callback runs while the executor waits for it inside a run, so
  // work queued from the callback could only start after the callback
  // returns: waiting for it there would hang the process.
  if (backend::in_host_callback())
    failed_precondition(
        "pjrtx: a host callback cannot run pjrtx computations or transfers (it runs inside "
        "one; the pjrtx executor waits for it). Compute on the CPU arrays it receives.");
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    pending_.fetch_add(1);
  }
  cv_.notify_one();
}

void Executor::loop(int index) {
  backend::make_default(*device_);
  profile_thread_name(index == 0 ? std::string("pjrtx executor")
                                 : "pjrtx executor " + std::to_string(index));
  for (;;) {
    std::function<void()> task;
    // The next call usually arrives within microseconds of the last one
    // finishing (a training loop, a chain of small calls).
    spin_until([this] { return pending_.load(std::memory_order_acquire) > 0; }, spin_us());
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop requested and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
      pending_.fetch_sub(1);
    }
    try {
      task();
    } catch (const std::exception& e) {
      // Tasks report their own errors through events; reaching here is a bug,
      // but it must not take the process down.
      std::fprintf(stderr, "[pjrtx] internal error on the executor: %s\n", e.what());
    }
  }
}

}  // namespace pjrtx::runtime
