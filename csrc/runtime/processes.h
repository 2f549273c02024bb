// A pjrtx client that spans processes (jax.distributed.initialize): what
// PJRT_Client_Create passes (this process's index, the process count and
// JAX's key-value store) and the exchange through that store that lets every
// process list every process's devices and reach the others.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pjrtx::runtime {

// JAX's coordination-service store as PJRT hands it to a plugin: keys are
// write-once (jaxlib prefixes them with "pjrtx:").
struct KvStore {
  // Blocks up to timeout_ms; throws (UNAVAILABLE) when the key never came.
  std::function<std::string(const std::string& key, int timeout_ms)> get;
  std::function<void(const std::string& key, const std::string& value)> put;
};

struct ProcessOptions {
  int node_id = 0, num_nodes = 1;
  std::optional<KvStore> kv;
};

// What each process tells the others when its client is created.
struct PeerInfo {
  int local_devices = 0;
  std::string kind;      // the devices' kind ("MLX CPU", ...)
  std::string hostname;
  std::string address;   // "ip:port" where MLX's ring accepts this process
  int num_processes = 0;  // the process count this process was started with
};

// Publishes `mine` under this client's key and reads every process's
// (num_nodes entries, by node id). Throws UNAVAILABLE naming the processes
// that did not publish within PJRTX_DISTRIBUTED_TIMEOUT_S.
std::vector<PeerInfo> exchange_peer_info(const ProcessOptions& options, const PeerInfo& mine);

// This process's PeerInfo address before the exchange: an unused TCP port
// and the IP other hosts would reach ("" hostname-equal peers use
// 127.0.0.1; see ring_hostfile).
PeerInfo local_peer_info(int local_devices, const std::string& kind);

// MLX's ring hostfile (JSON) for `peers`: 127.0.0.1 for every rank when all
// run on one host (and PJRTX_DISTRIBUTED_HOST is unset), else each peer's
// published address.
std::string ring_hostfile(const std::vector<PeerInfo>& peers);

}  // namespace pjrtx::runtime
