// Devices and memories (device.h).
#include "runtime/device.h"

#include "common/error.h"

namespace pjrtx::runtime {

std::string_view memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kPinnedHost: return "pinned_host";
    case MemoryKind::kUnpinnedHost: return "unpinned_host";
  }
  return "device";
}

std::string Memory::debug_string() const {
  return "PjrtxMemory(id=" + std::to_string(id_) + ", kind=" + std::string(kind()) +
         ", device=" + std::to_string(device_->id()) + ")";
}
std::string Memory::to_string() const {
  return "PjrtxMemory(id=" + std::to_string(id_) + ", kind=" + std::string(kind()) + ")";
}

// Memory ids are unique over the client: device d holds ids 3d, 3d+1, 3d+2.
Device::Device(int id, Client* client, std::string kind, Executor* executor, int process_index,
               int local_id)
    : id_(id),
      client_(client),
      kind_(std::move(kind)),
      executor_(executor),
      process_index_(process_index),
      local_id_(local_id < 0 ? id : local_id) {
  for (int k = 0; k < kNumMemoryKinds; ++k)
    memories_.push_back(
        std::make_unique<Memory>(id * kNumMemoryKinds + k, static_cast<MemoryKind>(k), this));
}

Executor& Device::executor() const {
  if (executor_ == nullptr)
    invalid_argument("pjrtx: ", to_string(), " belongs to process ", process_index_,
                     "; this process can only run on and transfer to its own devices");
  return *executor_;
}

Memory* Device::memory(std::string_view name) const {
  if (name.empty()) return default_memory();
  for (const auto& m : memories_)
    if (m->kind() == name) return m.get();
  invalid_argument("pjrtx: no memory of kind '", name, "' on ", to_string(),
                   " (kinds: device, pinned_host, unpinned_host)");
}

std::vector<Memory*> Device::memories() const {
  std::vector<Memory*> out;
  for (const auto& m : memories_) out.push_back(m.get());
  return out;
}

std::string Device::debug_string() const { return "pjrtx:" + std::to_string(id_); }
std::string Device::to_string() const {
  return "PjrtxDevice(id=" + std::to_string(id_) + ", kind='" + kind_ + "')";
}

}  // namespace pjrtx::runtime
