#include "runtime/buffer.h"

#include <mlx/array.h>

#include "runtime/device.h"

namespace pjrtx::runtime {

Buffer::Buffer(compiler::TensorType type, Memory* memory, EventPtr ready)
    : type_(std::move(type)), memory_(memory), ready_(std::move(ready)) {}

Device* Buffer::device() const { return memory_->device(); }

Buffer::~Buffer() = default;

void Buffer::set_array(mx::array a) {
  std::lock_guard<std::mutex> lock(mu_);
  // A deleted buffer still takes its data while pending work holds a use.
  if (!deleted_ || uses_ > 0) array_ = std::make_unique<mx::array>(std::move(a));
}

void Buffer::replace_array(mx::array a) {
  std::lock_guard<std::mutex> lock(mu_);
  if (array_) *array_ = std::move(a);
}

mx::array Buffer::array() const {
  if (deleted_) failed_precondition("pjrtx: buffer ", type_.str(), " was deleted");
  return array_for_use();
}

mx::array Buffer::array_for_use() const {
  if (ErrorPtr e = ready_->error()) throw *e;
  std::lock_guard<std::mutex> lock(mu_);
  if (!array_)
    throw_error(ErrorCode::kInternal, "pjrtx: buffer ", type_.str(), " has no data");
  return *array_;
}

void Buffer::acquire_use(const char* who) {
  std::lock_guard<std::mutex> lock(mu_);
  if (deleted_) failed_precondition("pjrtx: ", who, ": buffer ", type_.str(), " was deleted");
  ++uses_;
}

void Buffer::release_use() {
  std::unique_ptr<mx::array> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--uses_ == 0 && deleted_) drop.swap(array_);
  }
}

void Buffer::add_external_ref(mx::array a) {
  std::lock_guard<std::mutex> lock(mu_);
  external_.push_back(std::move(a));
}

void Buffer::drop_external_ref() {
  std::vector<mx::array> drop;
  std::lock_guard<std::mutex> lock(mu_);
  if (external_.empty())
    failed_precondition("pjrtx: buffer ", type_.str(), " has no external reference to drop");
  drop.push_back(std::move(external_.back()));
  external_.pop_back();
}

void Buffer::mark_deleted() {
  std::unique_ptr<mx::array> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    deleted_ = true;
    if (uses_ == 0) drop.swap(array_);
  }
  // `drop` is released here, outside the lock. An evaluated MLX array owns
  // only its data, so releasing it off the executor thread is safe.
}

}  // namespace pjrtx::runtime
