// The meeting point of one multi-device execution. Every device runs the
// same program (SPMD) on its own executor thread; at its k-th collective a
// device evaluates its operands, posts them under k and takes the operands
// of the other members of its group once all have arrived. The arrays are
// evaluated and immutable, so a device builds its result from the others'
// arrays with ordinary MLX ops on its own stream: no bytes move until that
// result is computed, and each device's result is its own storage.
//
// Every device reaches the same collectives in the same order (the program
// is the same and control flow around a collective must agree across the
// group, as on XLA), so k identifies one collective instance of the run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/mlx/arrays.h"
#include "backend/mlx/process_group.h"

namespace pjrtx::backend {

// A run whose devices span processes (jax.distributed): which logical
// devices are this process's, and the logical devices of every process in
// rank order (`rows`, process 0's first; each process holds as many).
struct ProcessLayout {
  int num_logical = 0;
  std::vector<int> local;
  std::vector<int> rows;
};

class CollectiveRun {
 public:
  // `timeout`: how long a device waits for the rest of its group.
  explicit CollectiveRun(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  // Posts `mine` (already evaluated) as member `me` of `group` (logical
  // device indices, in group order) for collective `seq`, waits until every
  // member has posted, and returns all members' arrays in group order.
  // Throws DEADLINE_EXCEEDED after the timeout and the abort reason when
  // another device's run failed.
  std::vector<Arrays> exchange(int64_t seq, const std::vector<int>& group, int me, Arrays mine,
                               const std::string& op);

  // Wakes every waiting device with this error (a device's run failed: the
  // others would otherwise wait for it until the timeout).
  void abort(const std::string& why);

  // Some of the run's devices belong to other processes. Every collective
  // then becomes one exchange between the processes: this process's
  // devices post their operands, the last to arrive gathers every
  // process's (process_group.h) and each device takes its group's. So that
  // every process joins every exchange, a device whose group is itself
  // alone still posts (pass()).
  void span_processes(ProcessLayout layout);
  bool spans_processes() const { return layout_.has_value(); }
  // A collective this device meets alone: no-op within one process.
  void pass(int64_t seq, int me, const Arrays& mine, const std::string& op);
  // Across processes, an all_reduce of sum/max/min whose one group is every
  // device of the run: this process folds its devices' values (`fold`, in
  // their logical order), then one MLX all_sum/all_max/all_min per operand
  // combines the processes' partials, so each process sends and receives
  // what MLX's own all_sum would. Every device gets its own copy.
  // Across processes, an all_gather along dim 0 whose one group is every
  // device of the run: one MLX all_gather per operand, whose result in the
  // processes' order already is the gathered value (no reassembly) when the
  // group lists the devices in that order; else the general exchange.
  Arrays gather_processes(int64_t seq, const std::vector<int>& group, int me, Arrays mine,
                          const std::string& op);
  Arrays reduce_processes(int64_t seq, int me, Arrays mine, ProcessReduce kind,
                          const std::function<mx::array(const mx::array&, const mx::array&)>& fold,
                          const std::string& op);

 private:
  // Posts `mine` for `seq`; the last local device runs `cross` on every
  // local device's values (in local order) and stores its result for all;
  // returns that shared result (each device copies it if it needs its own).
  Arrays shared_exchange(int64_t seq, int me, Arrays mine, const std::string& op,
                         const std::function<Arrays(const std::vector<Arrays>&)>& cross);
  std::vector<Arrays> exchange_processes(int64_t seq, const std::vector<int>& group, int me,
                                         Arrays mine, const std::string& op);
  struct World {
    std::vector<std::optional<Arrays>> parts;  // by logical device
    Arrays shared;  // shared_exchange's one result for this process
    size_t posted = 0, taken = 0;
    bool ready = false;
  };
  using CrossFn = std::function<std::vector<Arrays>(const std::vector<Arrays>&)>;
  using StoreFn = std::function<void(World&, std::vector<Arrays>)>;
  // One exchange between processes for collective `seq`: this device posts
  // `mine`; the last local device runs `cross` on every local device's
  // values (bounded by the timeout) and `store`s what it returns; every
  // device waits for that and returns `take` of the exchange's state.
  template <typename Take>
  auto world_round(int64_t seq, int me, Arrays mine, const std::string& op,
                   const CrossFn& cross, const StoreFn& store, Take take)
      -> decltype(take(std::declval<World&>()));
  std::optional<ProcessLayout> layout_;
  std::map<int64_t, World> world_;

  struct Slot {
    std::vector<std::optional<Arrays>> parts;
    size_t arrived = 0, taken = 0;
  };
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  // (seq, first member of the group): groups of one collective meet apart.
  std::map<std::pair<int64_t, int>, Slot> slots_;
  std::optional<std::string> aborted_;
};

}  // namespace pjrtx::backend
