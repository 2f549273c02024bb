// The ground floor of the MLX back end: the `mx` alias and `Arrays`, the
// one type nearly every backend header speaks. Headers that only pass
// arrays around (constant_pool.h, graph_stats.h, host/host_kernel.h,
// async_eval.h, process_group.h, collective_run.h) include this instead of
// registry.h, so they do not pull in the lowering machinery (LowerCtx,
// RegionProgram, the registry) and stay below it.
#pragma once

#include <mlx/array.h>

#include <vector>

namespace pjrtx::backend {

namespace mx = mlx::core;
using Arrays = std::vector<mx::array>;

}  // namespace pjrtx::backend
