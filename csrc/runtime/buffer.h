// A device buffer: a typed MLX array that becomes available when its ready
// event fires. The array is set exactly once (at upload, or by the executor
// when the computation producing it finishes); delete drops it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "compiler/types.h"
#include "runtime/event.h"

namespace mlx::core {
class array;
}

namespace pjrtx::runtime {

namespace mx = mlx::core;
class Device;
class Memory;

class Buffer {
 public:
  Buffer(compiler::TensorType type, Memory* memory, EventPtr ready);
  ~Buffer();

  const compiler::TensorType& type() const { return type_; }
  Memory* memory() const { return memory_; }
  Device* device() const;
  const EventPtr& ready_event() const { return ready_; }

  void set_array(mx::array a);
  // The same values in another layout (a contiguous copy of a view).
  void replace_array(mx::array a);
  // The array; throws FAILED_PRECONDITION if deleted and the producing
  // computation's error if it failed. Call once ready.
  mx::array array() const;
  // Drops the array (the memory goes back to MLX once no computation uses it).
  void mark_deleted();
  bool is_deleted() const { return deleted_.load(); }

  // Work enqueued on the executor (execute, to-host, copy) holds a use from
  // enqueue until it has read the array: PJRT lets the caller delete an
  // argument right after dispatch (jax.Array.delete()), and the pending work
  // must still see the data, as on XLA:CPU. acquire_use throws
  // FAILED_PRECONDITION when the buffer is already deleted; array_for_use
  // ignores a later delete; release_use drops a deleted buffer's array once
  // the last use is gone.
  void acquire_use(const char* who);
  mx::array array_for_use() const;
  void release_use();

  // External references (jaxlib's zero-copy NumPy views, the buffer
  // protocol, DLPack) read the data through a raw pointer: each holds the
  // evaluated array, so the memory stays valid (and MLX never reuses it for
  // an op's output) even after the buffer is deleted.
  void add_external_ref(mx::array a);
  void drop_external_ref();
  int64_t on_device_size() const { return type_.byte_size(); }

 private:
  compiler::TensorType type_;
  Memory* memory_;
  EventPtr ready_;
  mutable std::mutex mu_;
  std::unique_ptr<mx::array> array_;  // (MLX stays out of this header)
  std::atomic<bool> deleted_{false};
  int uses_ = 0;  // guarded by mu_
  std::vector<mx::array> external_;  // guarded by mu_
};

// Holds one use of a buffer for the lifetime of a task on the executor.
class BufferUse {
 public:
  BufferUse(std::shared_ptr<Buffer> b, const char* who) : b_(std::move(b)) {
    b_->acquire_use(who);
  }
  BufferUse(BufferUse&& o) noexcept : b_(std::move(o.b_)) {}
  BufferUse(const BufferUse&) = delete;
  BufferUse& operator=(const BufferUse&) = delete;
  BufferUse& operator=(BufferUse&&) = delete;
  ~BufferUse() {
    if (b_) b_->release_use();
  }
  const std::shared_ptr<Buffer>& buffer() const { return b_; }

 private:
  std::shared_ptr<Buffer> b_;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace pjrtx::runtime
