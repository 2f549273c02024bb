// Host-folded index arithmetic in counted loops. A fori_loop body turns its
// counter into indices with scalar integer work: `i % n` alone is a dozen
// ops once JAX's sign fix-up and XLA's division-by-zero answers are spelled
// out, and each op is an MLX primitive per iteration, several times the cost
// of the buffer read and write the indices serve. The counted path knows
// every induction variable's value on the host (loops/counted_loop.h), so the
// scalars computed from induction variables and constants alone are
// computed here, exactly as StableHLO defines them (two's complement wrap,
// x / 0 = -1, x % 0 = x, out-of-range shift counts), and enter the traced
// block as inputs; their instructions are skipped in it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/mlx/host/host_int.h"
#include "backend/mlx/lower_ctx.h"
#include "backend/mlx/loops/counted_loop.h"

namespace pjrtx::backend {

// Host values by ValueId (a map: a plan has many values, a loop body's
// index arithmetic few).
using Values = std::unordered_map<compiler::ValueId, Int128>;

class HostFold {
 public:
  // The foldable part of `body` when the loop state entries `tracked` are
  // known on the host each iteration; nullptr when nothing folds. Descends
  // into functions the body calls from one call site only, and folds a call
  // whole when the callee is all foldable work on known operands.
  static std::shared_ptr<const HostFold> analyze(const LowerCtx& ctx,
                                                 const compiler::Region& body,
                                                 const std::vector<size_t>& tracked);

  // By ValueId: set for a folded value (its instruction is skipped).
  const std::vector<uint8_t>& skip() const { return skip_; }
  // The folded values something that is not folded reads, in a fixed order:
  // what an iteration takes as inputs.
  const std::vector<compiler::ValueId>& inputs() const { return inputs_; }
  // A dynamic_slice or dynamic_update_slice start that reads a folded
  // value (an input): the host clamps it too, as clamp_index would for the
  // slice's bound `hi`, so the block holds no clamp kernel per index.
  struct Start {
    compiler::ValueId value;
    compiler::DType dtype;
    int64_t hi;
  };
  const std::vector<Start>& starts() const { return starts_; }
  // For an iteration where tracked[k] holds ivs[k]: the values of inputs(),
  // then the clamped starts() as int32[1]. Executor thread only (reuses a
  // scratch buffer).
  Arrays evaluate(const std::vector<Int128>& ivs) const;
  // Instructions skipped per iteration (for tests and tracing).
  size_t folded_count() const { return folded_count_; }

  struct Action;  // host_fold.cc

 private:
  const compiler::Plan* plan_ = nullptr;
  std::vector<compiler::ValueId> tracked_params_;
  std::vector<std::pair<compiler::ValueId, Int128>> constants_;
  std::vector<Action> actions_;
  std::vector<uint8_t> skip_;
  std::vector<compiler::ValueId> inputs_;
  std::vector<Start> starts_;
  size_t folded_count_ = 0;
  mutable Values scratch_;  // constants preloaded
  friend struct Analyzer;
};

// While a block is traced, per iteration: the host-clamped start for a
// folded index (the placeholder array its slot holds) and a slice's bound.
// A scope owns the registrations (the placeholders die with the trace).
class HostClampedStarts {
 public:
  HostClampedStarts() = default;
  HostClampedStarts(const HostClampedStarts&) = delete;
  HostClampedStarts& operator=(const HostClampedStarts&) = delete;
  ~HostClampedStarts();
  // Replaces the previous iteration's registrations.
  void set(const HostFold& fold, const std::vector<std::optional<mx::array>>& slots,
           Arrays::const_iterator clamped);
};
// The registered start for `index` and `hi` (indexing.cc), else nullopt.
std::optional<mx::array> host_clamped_start(const mx::array& index, int64_t hi);

}  // namespace pjrtx::backend
