// A one-shot completion signal: pending, then ready or failed (once).
// Callbacks run on the thread that completes the event, or at once on the
// registering thread when it is already complete.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/error.h"

namespace pjrtx::runtime {

using ErrorPtr = std::shared_ptr<const Error>;

class Event {
 public:
  using Callback = std::function<void(const ErrorPtr&)>;

  static std::shared_ptr<Event> create() { return std::make_shared<Event>(); }
  static std::shared_ptr<Event> ready();

  void set_ready() { complete(nullptr); }
  void set_error(ErrorPtr error) { complete(std::move(error)); }
  bool is_ready() const;
  // The error once complete (nullptr on success or while pending).
  ErrorPtr error() const;
  // Blocks until complete; returns the error, if any.
  ErrorPtr await() const;
  void on_ready(Callback cb);

 private:
  void complete(ErrorPtr error);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> done_flag_{false};  // done_, readable without the lock
  ErrorPtr error_;
  std::vector<Callback> callbacks_;
};

using EventPtr = std::shared_ptr<Event>;

}  // namespace pjrtx::runtime
