// The processes of a multi-process pjrtx run (jax.distributed), joined
// through MLX's distributed engine. The runtime agrees on ranks and
// addresses through JAX's key-value store (runtime/processes.h); this layer
// configures MLX's back end with them and moves the bytes.
#pragma once

#include <string>
#include <vector>

#include "backend/mlx/arrays.h"

namespace pjrtx::backend {

struct ProcessGroupConfig {
  // MLX back end: "ring" (TCP; hostfile below), "mpi", "nccl", "jaccl".
  std::string backend = "ring";
  int rank = 0, size = 1;
  // ring: JSON, one list of "ip:port" per rank (MLX_HOSTFILE's format).
  std::string hostfile_json;
};

// Initializes MLX's distributed group once per process; throws
// UNAVAILABLE naming the back end and MLX's reason when it cannot, and
// INVALID_ARGUMENT when MLX's group disagrees with `config` on rank or size.
void join_processes(const ProcessGroupConfig& config);
bool processes_joined();
// Whether this MLX build has the distributed back end `name` (ring, mpi,
// nccl, jaccl) and can start it here (mpi needs libmpi at run time).
bool distributed_backend_available(const std::string& name);
// The back end in use ("" before join_processes).
std::string process_backend();

// Every process contributes one list of arrays per local device (the same
// number of devices, operands, shapes and dtypes in every process); returns
// every process's lists in rank order (rank r's k-th device at
// r * local.size() + k). One MLX all_gather per operand, on the CPU stream
// (MLX's distributed ops run there). Every process must call it the same
// number of times in the same order.
std::vector<Arrays> gather_from_processes(const std::vector<Arrays>& local);

// The same exchange before it is split: one array per operand, every
// process's devices' values stacked along a new leading axis (rows in rank
// order, each process's devices in its order).
Arrays gather_stacked_from_processes(const std::vector<Arrays>& local);

enum class ProcessReduce { kSum, kMax, kMin };
// Elementwise sum/max/min of `x` over every process (one MLX all_sum,
// all_max or all_min on the CPU stream, evaluated): what each process holds
// after, the same in all of them.
mx::array reduce_across_processes(const mx::array& x, ProcessReduce kind);

}  // namespace pjrtx::backend
