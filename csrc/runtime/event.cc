#include "runtime/event.h"

#include "common/profile.h"
#include "common/spin.h"

namespace pjrtx::runtime {

std::shared_ptr<Event> Event::ready() {
  auto e = create();
  e->set_ready();
  return e;
}

bool Event::is_ready() const { return done_flag_.load(std::memory_order_acquire); }

ErrorPtr Event::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

ErrorPtr Event::await() const {
  spin_until([this] { return done_flag_.load(std::memory_order_acquire); }, spin_us());
  std::unique_lock<std::mutex> lock(mu_);
  if (done_) return error_;
  // Only a real block is a wait in the profile.
  ProfileScope scope("wait", "wait");
  cv_.wait(lock, [&] { return done_; });
  return error_;
}

void Event::on_ready(Callback cb) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(cb));
      return;
    }
  }
  cb(error_);
}

void Event::complete(ErrorPtr error) {
  std::vector<Callback> cbs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;  // first completion wins
    done_ = true;
    error_ = std::move(error);
    done_flag_.store(true, std::memory_order_release);
    cbs.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : cbs) cb(error_);
}

}  // namespace pjrtx::runtime
