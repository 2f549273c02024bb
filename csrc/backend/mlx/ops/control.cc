// Control flow: case and if, and the registration of while, whose
// placement and runs live in loops/ (loops/mlx_while.h). MLX has no
// device-side control flow, so these are host-driven steps inside a run:
// the branch index is read on the executor thread (without a wait when the
// host computed it), then the chosen region runs.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>
#include <mlx/ops.h>

#include "backend/mlx/async_eval.h"
#include "backend/mlx/host/host_small.h"
#include "backend/mlx/loops/mlx_while.h"
#include "backend/mlx/registry.h"

namespace pjrtx::backend {

namespace {

bool read_bool(const mx::array& p) {
  if (auto v = computed_int(p)) return *v != 0;  // no node, no wait
  mx::array b = mx::astype(p, mx::bool_);
  eval_now({b});
  return b.item<bool>();
}

// case(index): branch `index`, or the last branch when index is out of range.
Kernel lower_case(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  std::vector<std::shared_ptr<const RegionProgram>> branches;
  for (const auto& r : inst.regions) branches.push_back(ctx.lower_region(r));
  return [branches](RunState& st, const Arrays& in) {
    std::optional<int64_t> known = computed_int(in[0]);  // no node, no wait
    int64_t i = 0;
    if (known) {
      i = *known;
    } else {
      mx::array idx = mx::astype(in[0], mx::int64);
      eval_now({idx});
      i = idx.item<int64_t>();
    }
    int64_t n = static_cast<int64_t>(branches.size());
    if (i < 0 || i >= n) i = n - 1;
    return branches[i]->run(st, {});
  };
}

Kernel lower_if(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  auto then_branch = ctx.lower_region(inst.regions.at(0));
  auto else_branch = ctx.lower_region(inst.regions.at(1));
  return [then_branch, else_branch](RunState& st, const Arrays& in) {
    return read_bool(in[0]) ? then_branch->run(st, {}) : else_branch->run(st, {});
  };
}

}  // namespace

void register_control_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::while_, loops::lower_while);
  r.add(Opcode::case_, lower_case);
  r.add(Opcode::if_, lower_if);
}

}  // namespace pjrtx::backend
