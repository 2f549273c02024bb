// Host code as one node of an MLX graph: linalg routines, host callbacks and
// other work MLX has no op for run as a primitive on a CPU stream, in that
// stream's order, so they need no eval (and no host sync) while the graph is
// built, and they work on every MLX device (MLX fences across streams).
//
//   Arrays out = host_kernel("pjrtx_eigh", {x}, {{n, n}, {n}}, {f32, f32},
//       [](const Arrays& in, Arrays& out) { ... in[0].data<float>() ... });
//
// When fn runs, every input is evaluated and row-contiguous, and every
// output has fresh row-contiguous storage of its shape and dtype. fn runs on
// MLX's CPU stream thread; an exception it throws reaches the caller of
// eval/wait as an exception (and a pjrtx run reports it as the run's error).
#pragma once

#include <functional>
#include <string>

#include "backend/mlx/arrays.h"

namespace pjrtx::backend {

using HostFn = std::function<void(const Arrays& inputs, Arrays& outputs)>;

// kOnStream: fn always runs as a node on MLX's CPU stream. kNowIfReady: when
// every input is already computed and row-contiguous (a program's arguments
// and constants), fn runs at once on the calling thread and the outputs are
// computed arrays, so a run made of this one node hands MLX nothing (two
// thread hand-offs, ~6 us, saved); otherwise as kOnStream. For kernels whose
// fn may block the caller for its whole run (a host loop), not for host
// callbacks.
enum class HostRun { kOnStream, kNowIfReady };

Arrays host_kernel(std::string name, const Arrays& inputs, std::vector<mx::Shape> shapes,
                   std::vector<mx::Dtype> dtypes, HostFn fn, HostRun how = HostRun::kOnStream);

}  // namespace pjrtx::backend
