#include "backend/mlx/process_group.h"

#include <mlx/distributed/distributed.h>
#include <mlx/distributed/ops.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <unistd.h>

#include "backend/mlx/f64_scope.h"
#include "common/error.h"

namespace pjrtx::backend {

namespace {
namespace dist = mx::distributed;

std::mutex g_mu;
std::optional<dist::Group> g_group;
std::string g_backend;

dist::Group group() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_group)
    throw Error(ErrorCode::kInternal, "pjrtx: a cross-process collective ran before the "
                                      "processes were joined");
  return *g_group;
}
}  // namespace

void join_processes(const ProcessGroupConfig& config) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_group) {
    if (g_group->rank() != config.rank || g_group->size() != config.size)
      invalid_argument("pjrtx: this process already joined ", g_group->size(),
                       " processes as rank ", g_group->rank(), "; now asked for rank ",
                       config.rank, " of ", config.size);
    return;
  }
  if (!dist::is_available(config.backend))
    throw Error(ErrorCode::kUnavailable,
                "pjrtx: MLX's distributed back end '" + config.backend +
                    "' is not available in this MLX build (PJRTX_DISTRIBUTED chooses another)");
  if (config.backend == "ring") {
    // MLX's ring reads its peers from MLX_HOSTFILE and its rank from
    // MLX_RANK when it initializes; both come from JAX's key-value store.
    std::string path = "/tmp/pjrtx-ring-" + std::to_string(::getpid()) + "-" +
                       std::to_string(config.rank) + ".json";
    {
      std::ofstream f(path);
      f << config.hostfile_json;
      if (!f)
        throw Error(ErrorCode::kUnavailable, "pjrtx: cannot write the ring hostfile " + path);
    }
    ::setenv("MLX_HOSTFILE", path.c_str(), 1);
    ::setenv("MLX_RANK", std::to_string(config.rank).c_str(), 1);
  } else {
    ::setenv("MLX_RANK", std::to_string(config.rank).c_str(), 1);
    ::setenv("MLX_WORLD_SIZE", std::to_string(config.size).c_str(), 1);
  }
  dist::Group g = [&] {
    try {
      return dist::init(/*strict=*/true, config.backend);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kUnavailable, "pjrtx: joining " + std::to_string(config.size) +
                                               " processes through MLX's '" + config.backend +
                                               "' back end failed: " + e.what());
    }
  }();
  if (g.rank() != config.rank || g.size() != config.size)
    invalid_argument("pjrtx: MLX's '", config.backend, "' group is rank ", g.rank(), " of ",
                     g.size(), " but jax.distributed says process ", config.rank, " of ",
                     config.size);
  g_group = g;
  g_backend = config.backend;
}

bool processes_joined() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_group.has_value();
}

std::string process_backend() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_backend;
}

std::vector<Arrays> gather_from_processes(const std::vector<Arrays>& local) {
  dist::Group g = group();
  const size_t n_local = local.size();
  const size_t n_ops = n_local ? local.front().size() : 0;
  std::vector<Arrays> out(n_local * static_cast<size_t>(g.size()));
  for (size_t j = 0; j < n_ops; ++j) {
    Arrays column;
    for (const auto& dev : local) column.push_back(dev.at(j));
    CpuScope f64(column);  // stacking f64 on a GPU stream is refused
    mx::array stacked = mx::stack(column, 0);
    mx::array all = dist::all_gather(stacked, g, mx::Device(mx::Device::cpu));
    mx::eval(all);
    for (size_t row = 0; row < out.size(); ++row) {
      mx::Shape start(all.ndim(), 0), stop = all.shape();
      start[0] = static_cast<int>(row);
      stop[0] = static_cast<int>(row + 1);
      mx::array r = mx::squeeze(mx::slice(all, start, stop, mx::Device(mx::Device::cpu)), 0,
                                mx::Device(mx::Device::cpu));
      out[row].push_back(r);
    }
  }
  for (auto& a : out) mx::eval(a);
  return out;
}

}  // namespace pjrtx::backend
