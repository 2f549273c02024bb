#include "runtime/buffer.h"

#include <mlx/array.h>

namespace pjrtx::runtime {

Buffer::Buffer(compiler::TensorType type, Device* device, EventPtr ready)
    : type_(std::move(type)), device_(device), ready_(std::move(ready)) {}

Buffer::~Buffer() = default;

void Buffer::set_array(mx::array a) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!deleted_) array_ = std::make_unique<mx::array>(std::move(a));
}

mx::array Buffer::array() const {
  if (deleted_) failed_precondition("pjrtx: buffer ", type_.str(), " was deleted");
  if (ErrorPtr e = ready_->error()) throw *e;
  std::lock_guard<std::mutex> lock(mu_);
  if (!array_)
    throw_error(ErrorCode::kInternal, "pjrtx: buffer ", type_.str(), " has no data");
  return *array_;
}

void Buffer::mark_deleted() {
  std::unique_ptr<mx::array> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    deleted_ = true;
    drop.swap(array_);
  }
  // `drop` is released here, outside the lock. An evaluated MLX array owns
  // only its data, so releasing it off the executor thread is safe.
}

}  // namespace pjrtx::runtime
