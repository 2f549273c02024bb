#include "runtime/processes.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <sstream>

#include "common/env.h"
#include "common/error.h"

namespace pjrtx::runtime {

namespace {

int distributed_timeout_ms() {
  const std::string v = env_string("PJRTX_DISTRIBUTED_TIMEOUT_S");
  double s = 0;
  try {
    size_t used = 0;
    s = std::stod(v, &used);
    if (used != v.size()) s = 0;
  } catch (const std::exception&) {
    s = 0;
  }
  if (!(s > 0))
    invalid_argument("pjrtx: PJRTX_DISTRIBUTED_TIMEOUT_S must be a positive number of seconds, "
                     "got '", v, "'");
  return static_cast<int>(s * 1000);
}

// An unused TCP port (the kernel picks it; MLX's ring binds it a moment
// later, as torchrun and mlx.launch pick theirs).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(ErrorCode::kUnavailable, "pjrtx: cannot open a socket to pick a port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  if (port <= 0) throw Error(ErrorCode::kUnavailable, "pjrtx: cannot pick a free TCP port");
  return port;
}

std::string first_ipv4() {
  ifaddrs* list = nullptr;
  std::string ip = "127.0.0.1";
  if (::getifaddrs(&list) != 0) return ip;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) != nullptr) {
      ip = buf;
      break;
    }
  }
  ::freeifaddrs(list);
  return ip;
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// Fields never contain '\n' (kinds, host names, addresses).
std::string encode(const PeerInfo& p) {
  return std::to_string(p.local_devices) + "\n" + p.kind + "\n" + p.hostname + "\n" + p.address +
         "\n" + std::to_string(p.num_processes);
}

PeerInfo decode(const std::string& s, int node) {
  std::istringstream in(s);
  PeerInfo p;
  std::string n, count;
  if (!std::getline(in, n) || !std::getline(in, p.kind) || !std::getline(in, p.hostname) ||
      !std::getline(in, p.address) || !std::getline(in, count))
    throw Error(ErrorCode::kInternal, "pjrtx: process " + std::to_string(node) +
                                          " published an unreadable entry in JAX's key-value "
                                          "store (another pjrtx version?)");
  p.local_devices = std::stoi(n);
  p.num_processes = std::stoi(count);
  return p;
}

// Clients created one after another in one process (each jax backend
// re-initialization) publish under fresh keys: the store's keys are
// write-once. Every process creates its clients in the same order.
std::atomic<int> g_generation{0};

}  // namespace

PeerInfo local_peer_info(int local_devices, const std::string& kind) {
  PeerInfo p;
  p.local_devices = local_devices;
  p.kind = kind;
  p.hostname = hostname();
  std::string host = env_string("PJRTX_DISTRIBUTED_HOST");
  std::string port = env_string("PJRTX_DISTRIBUTED_PORT");
  if (!port.empty()) {
    int n = 0;
    try {
      size_t used = 0;
      n = std::stoi(port, &used);
      if (used != port.size()) n = 0;
    } catch (const std::exception&) {
      n = 0;
    }
    if (n < 1 || n > 65535)
      invalid_argument("pjrtx: PJRTX_DISTRIBUTED_PORT must be a TCP port (1-65535), got '", port,
                       "'");
  }
  p.address = (host.empty() ? first_ipv4() : host) + ":" +
              (port.empty() ? std::to_string(free_port()) : port);
  return p;
}

std::vector<PeerInfo> exchange_peer_info(const ProcessOptions& options, const PeerInfo& mine) {
  if (!options.kv)
    invalid_argument("pjrtx: ", options.num_nodes, " processes but no key-value store "
                     "(PJRT_Client_Create got no kv callbacks; use jax.distributed.initialize)");
  const int gen = g_generation.fetch_add(1);
  auto key = [gen](int node) {
    return "client/" + std::to_string(gen) + "/process/" + std::to_string(node);
  };
  PeerInfo published = mine;
  published.num_processes = options.num_nodes;
  options.kv->put(key(options.node_id), encode(published));
  const int timeout = distributed_timeout_ms();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  std::vector<PeerInfo> peers(options.num_nodes);
  for (int n = 0; n < options.num_nodes; ++n) {
    if (n == options.node_id) {
      peers[n] = published;
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    try {
      peers[n] = decode(options.kv->get(key(n), static_cast<int>(std::max<int64_t>(left, 1))), n);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kInternal) throw;
      throw Error(ErrorCode::kUnavailable,
                  "pjrtx: process " + std::to_string(options.node_id) + " of " +
                      std::to_string(options.num_nodes) + " waited " +
                      std::to_string(timeout / 1000) + " s for process " + std::to_string(n) +
                      " to create its pjrtx client (PJRTX_DISTRIBUTED_TIMEOUT_S; does every "
                      "process use pjrtx with the same jax.distributed settings?): " + e.what());
    }
    // Read at once, so that both sides of a mismatch fail now (a process
    // that counts more processes would otherwise wait for one that never
    // comes). A process that counts fewer than the coordinator's service
    // never gets here: jaxlib's connect waits for the missing one.
    if (peers[n].num_processes != options.num_nodes)
      invalid_argument("pjrtx: process ", n, " was started with ", peers[n].num_processes,
                       " processes and this one (process ", options.node_id, ") with ",
                       options.num_nodes,
                       ": every process needs the same num_processes in "
                       "jax.distributed.initialize");
  }
  return peers;
}

std::string ring_hostfile(const std::vector<PeerInfo>& peers) {
  bool one_host = env_string("PJRTX_DISTRIBUTED_HOST").empty();
  for (const auto& p : peers) one_host &= p.hostname == peers.front().hostname;
  std::string json = "[";
  for (size_t r = 0; r < peers.size(); ++r) {
    std::string addr = peers[r].address;
    if (one_host) addr = "127.0.0.1" + addr.substr(addr.rfind(':'));
    json += (r ? "," : "") + std::string("[\"") + addr + "\"]";
  }
  return json + "]";
}

}  // namespace pjrtx::runtime
