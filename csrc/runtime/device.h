// Devices and memories, the floor under buffers, executables and the
// client. Each device has three memories, the kinds XLA:CPU offers:
// "device" (the default), "pinned_host" and "unpinned_host". MLX keeps
// every array in one (unified) memory, so the three share storage; a
// buffer's memory is the kind JAX asked for, which it reads back for
// shardings and host offloading. The client (client.h) makes and owns them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pjrtx::runtime {

class Client;
class Device;
class Executor;

// The order is the memories' order on a device and their kind id.
enum class MemoryKind { kDevice = 0, kPinnedHost = 1, kUnpinnedHost = 2 };
constexpr int kNumMemoryKinds = 3;
std::string_view memory_kind_name(MemoryKind k);

class Memory {
 public:
  Memory(int id, MemoryKind kind, Device* device) : id_(id), kind_(kind), device_(device) {}
  int id() const { return id_; }
  std::string_view kind() const { return memory_kind_name(kind_); }
  int kind_id() const { return static_cast<int>(kind_); }
  Device* device() const { return device_; }
  std::string debug_string() const;
  std::string to_string() const;

 private:
  int id_;
  MemoryKind kind_;
  Device* device_;
};

class Device {
 public:
  // `executor` is null for a device of another process (jax.distributed):
  // listed, never run on here.
  Device(int id, Client* client, std::string kind, Executor* executor, int process_index = 0,
         int local_id = -1);
  int id() const { return id_; }
  // The device's index among its own process's devices.
  int local_hardware_id() const { return local_id_; }
  int process_index() const { return process_index_; }
  bool is_addressable() const { return executor_ != nullptr; }
  Client* client() const { return client_; }
  // The thread that runs this device's work, in the order it was posted.
  // Throws INVALID_ARGUMENT for another process's device.
  Executor& executor() const;
  // "MLX CPU", "MLX Metal", "MLX CUDA"
  const std::string& kind() const { return kind_; }
  std::string debug_string() const;
  std::string to_string() const;
  Memory* default_memory() const { return memories_.front().get(); }
  Memory* memory(MemoryKind k) const { return memories_.at(static_cast<size_t>(k)).get(); }
  // The memory of kind `name` ("device", "pinned_host", "unpinned_host");
  // an empty name is the default memory. Throws INVALID_ARGUMENT otherwise.
  Memory* memory(std::string_view name) const;
  std::vector<Memory*> memories() const;

 private:
  int id_;
  Client* client_;
  std::string kind_;
  Executor* executor_;
  int process_index_, local_id_;
  std::vector<std::unique_ptr<Memory>> memories_;
};

}  // namespace pjrtx::runtime
