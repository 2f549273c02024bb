// A device buffer: a typed MLX array that becomes available when its ready
// event fires. The array is set exactly once (at upload, or by the executor
// when the computation producing it finishes); delete drops it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "compiler/types.h"
#include "runtime/event.h"

namespace mlx::core {
class array;
}

namespace pjrtx::runtime {

namespace mx = mlx::core;
class Device;

class Buffer {
 public:
  Buffer(compiler::TensorType type, Device* device, EventPtr ready);
  ~Buffer();

  const compiler::TensorType& type() const { return type_; }
  Device* device() const { return device_; }
  const EventPtr& ready_event() const { return ready_; }

  void set_array(mx::array a);
  // The array; throws FAILED_PRECONDITION if deleted and the producing
  // computation's error if it failed. Call once ready.
  mx::array array() const;
  // Drops the array (the memory goes back to MLX once no computation uses it).
  void mark_deleted();
  bool is_deleted() const { return deleted_.load(); }
  int64_t on_device_size() const { return type_.byte_size(); }

 private:
  compiler::TensorType type_;
  Device* device_;
  EventPtr ready_;
  mutable std::mutex mu_;
  std::unique_ptr<mx::array> array_;  // (MLX stays out of this header)
  std::atomic<bool> deleted_{false};
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace pjrtx::runtime
