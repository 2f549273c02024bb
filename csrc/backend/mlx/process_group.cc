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
      std::string why = e.what();
      // EADDRINUSE (98 on Linux, 48 on macOS) from MLX's ring bind
      if (why.find("Couldn't bind") != std::string::npos &&
          (why.find("error: 98") != std::string::npos || why.find("error: 48") != std::string::npos))
        why += " (this process's ring port is in use: another program holds it, or "
               "PJRTX_DISTRIBUTED_PORT names a busy port)";
      throw Error(ErrorCode::kUnavailable, "pjrtx: joining " + std::to_string(config.size) +
                                               " processes through MLX's '" + config.backend +
                                               "' back end failed: " + why);
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

bool distributed_backend_available(const std::string& name) {
  try {
    return dist::is_available(name);
  } catch (const std::exception&) {
    return false;
  }
}

std::string process_backend() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_backend;
}

Arrays gather_stacked_from_processes(const std::vector<Arrays>& local) {
  dist::Group g = group();
  const size_t n_ops = local.empty() ? 0 : local.front().size();
  const mx::StreamOrDevice cpu = mx::Device(mx::Device::cpu);
  Arrays out;
  for (size_t j = 0; j < n_ops; ++j) {
    Arrays column;
    for (const auto& dev : local) column.push_back(dev.at(j));
    CpuScope f64(column);  // stacking f64 on a GPU stream is refused
    // One device: a leading axis of 1 is a view, no copy.
    mx::array stacked = column.size() == 1 ? mx::expand_dims(column[0], 0, cpu)
                                           : mx::stack(column, 0, cpu);
    out.push_back(dist::all_gather(stacked, g, cpu));
  }
  mx::eval(out);
  return out;
}

std::vector<Arrays> gather_from_processes(const std::vector<Arrays>& local) {
  Arrays all = gather_stacked_from_processes(local);
  const size_t rows = all.empty() ? 0 : static_cast<size_t>(all.front().shape(0));
  const mx::StreamOrDevice cpu = mx::Device(mx::Device::cpu);
  std::vector<Arrays> out(rows);
  for (const auto& a : all)
    for (size_t row = 0; row < rows; ++row) {
      mx::Shape start(a.ndim(), 0), stop = a.shape();
      start[0] = static_cast<int>(row);
      stop[0] = static_cast<int>(row + 1);
      out[row].push_back(mx::squeeze(mx::slice(a, start, stop, cpu), 0, cpu));
    }
  for (auto& a : out) mx::eval(a);
  return out;
}

mx::array reduce_across_processes(const mx::array& x, ProcessReduce kind) {
  dist::Group g = group();
  CpuScope f64(x);
  const mx::StreamOrDevice cpu = mx::Device(mx::Device::cpu);
  mx::array r = kind == ProcessReduce::kSum   ? dist::all_sum(x, g, cpu)
                : kind == ProcessReduce::kMax ? dist::all_max(x, g, cpu)
                                              : dist::all_min(x, g, cpu);
  mx::eval(r);
  return r;
}

}  // namespace pjrtx::backend
