// Collectives, replica/partition ids and tokens.
//
// Each device of an executable gets its own lowering (DeviceContext), so a
// collective knows at compile time which devices form its group and where
// it stands in it. At run time the device evaluates its operands, meets its
// group at the execution's CollectiveRun and builds its result from the
// members' arrays with MLX ops on its own stream (collective_run.h). A group
// of one is the identity, which is all a one-device program ever sees.
//
// Groups follow StableHLO's modes: without a channel the ids in
// replica_groups / source_target_pairs are replica ids; with a channel they
// are partition ids (all_to_all, collective_permute, collective_broadcast)
// or, for all_reduce / all_gather / reduce_scatter, replica ids each taking
// every partition along, or with use_global_device_ids flattened ids
// (replica * num_partitions + partition), which is what JAX emits.
//
// Tokens order side effects; a plan runs its instructions in order, so a
// token is a placeholder value (a bool scalar) that create_token and
// after_all produce.
#include <cstdint>
#include <numeric>

#include "backend/mlx/collective_run.h"
#include "backend/mlx/ops/combiner.h"
#include "backend/mlx/ops/common.h"
#include "common/error.h"

namespace pjrtx::backend {

namespace {

using compiler::DType;
using ops::Combiner;

// The channel id of a `#stablehlo.channel_handle<handle = N, type = T>`
// attribute (the frontend keeps it as text); 0 without one.
int64_t channel_id(const compiler::Instruction& inst) {
  if (!inst.has("channel_handle")) return 0;
  const std::string& s = inst.attr_str("channel_handle", "");
  auto at = s.find("handle = ");
  if (at == std::string::npos) return 0;
  return std::strtoll(s.c_str() + at + 9, nullptr, 10);
}

enum class Mode { kCrossReplica, kCrossPartition, kCrossReplicaAndPartition, kFlattenedIds };

// replica_groups as lists of ids; -1 pads ragged groups.
std::vector<std::vector<int64_t>> read_groups(LowerCtx& ctx, const char* attr) {
  std::vector<std::vector<int64_t>> groups;
  if (!ctx.inst().has(attr)) return groups;
  const compiler::TensorType& t = ctx.inst().attr_dense(attr).type;
  auto ids = ctx.inst().attr_dense_ints(attr);
  if (ids.empty()) return groups;
  if (t.rank() != 2) ctx.fail(attr, " must be a 2-D array of ids: ", t.str());
  const int64_t width = t.shape[1];
  for (size_t g = 0; g * width < ids.size(); ++g) {
    std::vector<int64_t> group;
    for (int64_t i = 0; i < width; ++i)
      if (int64_t id = ids[g * width + i]; id >= 0) group.push_back(id);
    if (!group.empty()) groups.push_back(std::move(group));
  }
  return groups;
}

// This device's group as logical device indices in group order, and its
// place in it.
struct Group {
  std::vector<int> members;
  int me = 0;     // this device's logical index
  size_t pos = 0;  // its place in `members`
  size_t size() const { return members.size(); }
};

Group my_group(LowerCtx& ctx, Mode mode) {
  const DeviceContext& d = ctx.device();
  auto groups = read_groups(ctx, "replica_groups");
  const bool by_partition = mode == Mode::kCrossPartition;
  const int space = mode == Mode::kFlattenedIds ? d.num_devices()
                    : by_partition              ? d.num_partitions
                                                : d.num_replicas;
  if (groups.empty()) {
    if (mode == Mode::kFlattenedIds) ctx.fail("use_global_device_ids needs replica_groups");
    std::vector<int64_t> all(space);
    std::iota(all.begin(), all.end(), 0);
    groups.push_back(all);
  }
  const int mine = mode == Mode::kFlattenedIds ? d.logical() : by_partition ? d.partition : d.replica;
  std::vector<bool> seen(space, false);
  const std::vector<int64_t>* found = nullptr;
  for (const auto& g : groups)
    for (int64_t id : g) {
      if (id >= space)
        ctx.fail("replica_groups names id ", id, " but the program runs ", d.num_replicas,
                 " replica(s) x ", d.num_partitions, " partition(s)");
      if (seen[id]) ctx.fail("replica_groups names id ", id, " twice");
      seen[id] = true;
      if (id == mine) found = &g;
    }
  Group out;
  out.me = d.logical();
  if (found == nullptr) {  // not in any group: it meets nobody
    out.members = {d.logical()};
    return out;
  }
  for (int64_t id : *found) {
    switch (mode) {
      case Mode::kFlattenedIds: out.members.push_back(static_cast<int>(id)); break;
      case Mode::kCrossPartition:
        out.members.push_back(d.replica * d.num_partitions + static_cast<int>(id));
        break;
      case Mode::kCrossReplica:
        out.members.push_back(static_cast<int>(id) * d.num_partitions + d.partition);
        break;
      case Mode::kCrossReplicaAndPartition: break;  // below
    }
  }
  if (mode == Mode::kCrossReplicaAndPartition)
    for (int p = 0; p < d.num_partitions; ++p)
      for (int64_t r : *found) out.members.push_back(static_cast<int>(r) * d.num_partitions + p);
  for (size_t i = 0; i < out.members.size(); ++i)
    if (out.members[i] == out.me) out.pos = i;
  return out;
}

// all_reduce, all_gather, reduce_scatter.
Mode reduction_mode(LowerCtx& ctx) {
  const bool global_ids = ctx.inst().attr_bool("use_global_device_ids", false);
  const bool channel = channel_id(ctx.inst()) > 0;
  if (global_ids && !channel) ctx.fail("use_global_device_ids needs a channel_handle");
  if (global_ids) return Mode::kFlattenedIds;
  return channel ? Mode::kCrossReplicaAndPartition : Mode::kCrossReplica;
}

// all_to_all, collective_permute, collective_broadcast.
Mode point_mode(LowerCtx& ctx) {
  return channel_id(ctx.inst()) > 0 ? Mode::kCrossPartition : Mode::kCrossReplica;
}

std::vector<Arrays> meet(RunState& st, const Group& g, const Arrays& in, const char* op) {
  if (st.collectives == nullptr)
    throw Error(ErrorCode::kInternal, std::string("[") + op +
                                          "] pjrtx: a multi-device collective ran without its "
                                          "execution's other devices");
  return st.collectives->exchange(st.collective_seq++, g.members, g.me, in, op);
}

// Each run passes every collective in program order, whatever its group,
// so the k-th collective of every device is the same instruction.
Kernel identity_counting(int me) {
  return [me](RunState& st, const Arrays& in) {
    // Across processes every device joins every exchange (collective_run.h).
    if (st.collectives != nullptr) st.collectives->pass(st.collective_seq, me, in, "collective");
    ++st.collective_seq;
    return in;
  };
}

mx::array slice_along(const mx::array& a, int dim, int64_t begin, int64_t end) {
  mx::Shape start(a.ndim(), 0), stop = a.shape();
  start[dim] = static_cast<int>(begin);
  stop[dim] = static_cast<int>(end);
  return mx::slice(a, start, stop);
}

Kernel lower_all_reduce(LowerCtx& ctx) {
  Group g = my_group(ctx, reduction_mode(ctx));
  if (ctx.num_in() != ctx.num_out()) ctx.fail("expects one result per operand");
  for (size_t i = 0; i < ctx.num_in(); ++i)
    if (ctx.in(i) != ctx.out(i))
      ctx.fail("result ", i, " must have its operand's type: ", ctx.in(i).str(), " vs ",
               ctx.out(i).str());
  if (g.size() == 1) return identity_counting(ctx.device().logical());
  if (ctx.inst().regions.empty()) ctx.fail("has no reduction body");
  const DType t = ctx.in(0).dtype;
  std::optional<Combiner> c = ops::match_combiner(ctx.inst().regions[0], t);
  auto body = c ? nullptr : ctx.lower_region(ctx.inst().regions[0]);
  int64_t bytes = 0;
  for (size_t i = 0; i < ctx.num_in(); ++i) bytes += ctx.in(i).byte_size();
  // Small values: every device folds all members' values (k reads of S
  // bytes each, one round). Large ones in a group of 3 or more: each device
  // folds only its 1/k of the elements, the devices swap those chunks and
  // concatenate them (about 2 S read per device instead of k S), as a
  // reduce-scatter then an all-gather. Every member takes the same branch
  // (the value's size and the group size are the same for all), so their
  // collective counts stay in step.
  constexpr int64_t kTwoPhaseBytes = int64_t{256} << 10;
  // Across processes every collective is one exchange (collective_run.h).
  const bool two_phase = bytes >= kTwoPhaseBytes && g.size() >= 3 && !ctx.device().spans_processes;
  auto fold = [c, body, t](RunState& st, const std::vector<mx::array>& parts) {
    // Members' values combined in group order, as one device folding the
    // group's contributions would.
    mx::array acc = parts[0];
    for (size_t k = 1; k < parts.size(); ++k)
      acc = c ? ops::combine(*c, acc, parts[k], t) : body->run_batched(st, {acc, parts[k]})[0];
    return acc;
  };
  // Across processes, one group of every device reducing by sum/max/min:
  // fold within the process, then MLX's own all_sum/all_max/all_min.
  const DeviceContext& d = ctx.device();
  std::optional<ProcessReduce> across;
  // MLX's distributed reductions take these types (not pred, complex, 4-bit
  // or 8-bit floats); every operand must be of the one type matched.
  auto reducible = [](DType x) {
    switch (x) {
      case DType::kS8: case DType::kS16: case DType::kS32: case DType::kS64:
      case DType::kU8: case DType::kU16: case DType::kU32: case DType::kU64:
      case DType::kF16: case DType::kBF16: case DType::kF32: case DType::kF64: return true;
      default: return false;
    }
  };
  bool same_type = true;
  for (size_t i = 0; i < ctx.num_in(); ++i) same_type &= ctx.in(i).dtype == t;
  if (d.spans_processes && c && static_cast<int>(g.size()) == d.num_devices() && same_type &&
      reducible(t)) {
    if (*c == Combiner::kAdd) across = ProcessReduce::kSum;
    if (*c == Combiner::kMax) across = ProcessReduce::kMax;
    if (*c == Combiner::kMin) across = ProcessReduce::kMin;
  }
  if (across)
    return [g, c, t, kind = *across](RunState& st, const Arrays& in) {
      auto fold2 = [c, t](const mx::array& a, const mx::array& b) {
        return ops::combine(*c, a, b, t);
      };
      return st.collectives->reduce_processes(st.collective_seq++, g.me, in, kind, fold2,
                                              "stablehlo.all_reduce");
    };
  return [g, fold, two_phase](RunState& st, const Arrays& in) {
    auto all = meet(st, g, in, "stablehlo.all_reduce");
    Arrays out;
    if (!two_phase) {
      for (size_t i = 0; i < in.size(); ++i) {
        std::vector<mx::array> parts;
        for (const auto& m : all) parts.push_back(m[i]);
        out.push_back(fold(st, parts));
      }
      return out;
    }
    const int64_t k = static_cast<int64_t>(g.size()), pos = static_cast<int64_t>(g.pos);
    Arrays chunks;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t n = static_cast<int64_t>(in[i].size());
      const int begin = static_cast<int>(n * pos / k), end = static_cast<int>(n * (pos + 1) / k);
      std::vector<mx::array> parts;
      for (const auto& m : all)
        parts.push_back(mx::slice(mx::flatten(m[i]), {begin}, {end}));
      chunks.push_back(fold(st, parts));
    }
    auto reduced = meet(st, g, chunks, "stablehlo.all_reduce");
    for (size_t i = 0; i < in.size(); ++i) {
      Arrays pieces;
      for (const auto& m : reduced) pieces.push_back(m[i]);
      out.push_back(mx::reshape(mx::concatenate(pieces, 0), in[i].shape()));
    }
    return out;
  };
}

Kernel lower_all_gather(LowerCtx& ctx) {
  Group g = my_group(ctx, reduction_mode(ctx));
  const int dim = static_cast<int>(ctx.inst().attr_int("all_gather_dim"));
  if (ctx.num_in() != ctx.num_out()) ctx.fail("expects one result per operand");
  for (size_t i = 0; i < ctx.num_in(); ++i) {
    if (dim < 0 || dim >= ctx.in(i).rank()) ctx.fail("all_gather_dim ", dim, " out of range");
    compiler::TensorType want = ctx.in(i);
    want.shape[dim] *= static_cast<int64_t>(g.size());
    if (want != ctx.out(i))
      ctx.fail("a group of ", g.size(), " gathers ", ctx.in(i).str(), " into ", want.str(),
               ", not ", ctx.out(i).str());
  }
  if (g.size() == 1) return identity_counting(ctx.device().logical());
  // Across processes, every device gathering along dim 0: MLX's all_gather
  // result is the value (collective_run.h).
  if (dim == 0 && ctx.device().spans_processes &&
      static_cast<int>(g.size()) == ctx.device().num_devices())
    return [g](RunState& st, const Arrays& in) {
      return st.collectives->gather_processes(st.collective_seq++, g.members, g.me, in,
                                              "stablehlo.all_gather");
    };
  return [g, dim](RunState& st, const Arrays& in) {
    auto all = meet(st, g, in, "stablehlo.all_gather");
    Arrays out;
    for (size_t i = 0; i < in.size(); ++i) {
      Arrays parts;
      for (const auto& m : all) parts.push_back(m[i]);
      out.push_back(mx::concatenate(parts, dim));
    }
    return out;
  };
}

Kernel lower_reduce_scatter(LowerCtx& ctx) {
  Group g = my_group(ctx, reduction_mode(ctx));
  const int dim = static_cast<int>(ctx.inst().attr_int("scatter_dimension"));
  if (ctx.num_in() != 1 || ctx.num_out() != 1) ctx.fail("expects one operand and one result");
  const compiler::TensorType& in = ctx.in(0);
  if (dim < 0 || dim >= in.rank()) ctx.fail("scatter_dimension ", dim, " out of range");
  const int64_t n = static_cast<int64_t>(g.size());
  if (in.shape[dim] % n != 0)
    ctx.fail("dimension ", dim, " of ", in.str(), " does not split into ", n, " parts");
  compiler::TensorType want = in;
  want.shape[dim] /= n;
  if (want != ctx.out(0)) ctx.fail("expects a ", want.str(), " result, not ", ctx.out(0).str());
  if (ctx.inst().regions.empty()) ctx.fail("has no reduction body");
  if (g.size() == 1) return identity_counting(ctx.device().logical());
  const DType t = in.dtype;
  std::optional<Combiner> c = ops::match_combiner(ctx.inst().regions[0], t);
  auto body = c ? nullptr : ctx.lower_region(ctx.inst().regions[0]);
  const int64_t chunk = want.shape[dim], begin = chunk * static_cast<int64_t>(g.pos);
  return [g, c, body, t, dim, chunk, begin](RunState& st, const Arrays& in) {
    auto all = meet(st, g, in, "stablehlo.reduce_scatter");
    // Only this device's chunk of each member is read.
    mx::array acc = slice_along(all[0][0], dim, begin, begin + chunk);
    for (size_t k = 1; k < all.size(); ++k) {
      mx::array part = slice_along(all[k][0], dim, begin, begin + chunk);
      acc = c ? ops::combine(*c, acc, part, t) : body->run_batched(st, {acc, part})[0];
    }
    // The group has two or more members, so acc is a new array, never a
    // view of another device's storage.
    return Arrays{acc};
  };
}

Kernel lower_all_to_all(LowerCtx& ctx) {
  Group g = my_group(ctx, point_mode(ctx));
  const int split = static_cast<int>(ctx.inst().attr_int("split_dimension"));
  const int concat = static_cast<int>(ctx.inst().attr_int("concat_dimension"));
  const int64_t count = ctx.inst().attr_int("split_count");
  if (count != static_cast<int64_t>(g.size()))
    ctx.fail("split_count ", count, " but the group has ", g.size(), " devices");
  if (ctx.num_in() != ctx.num_out()) ctx.fail("expects one result per operand");
  for (size_t i = 0; i < ctx.num_in(); ++i) {
    const auto& t = ctx.in(i);
    if (split < 0 || split >= t.rank() || concat < 0 || concat >= t.rank())
      ctx.fail("split/concat dimension out of range for ", t.str());
    if (t.shape[split] % count != 0)
      ctx.fail("dimension ", split, " of ", t.str(), " does not split into ", count, " parts");
    compiler::TensorType want = t;
    want.shape[split] /= count;
    want.shape[concat] *= count;
    if (want != ctx.out(i)) ctx.fail("expects a ", want.str(), " result, not ", ctx.out(i).str());
  }
  if (g.size() == 1) return identity_counting(ctx.device().logical());
  const size_t pos = g.pos;
  return [g, split, concat, count, pos](RunState& st, const Arrays& in) {
    auto all = meet(st, g, in, "stablehlo.all_to_all");
    Arrays out;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t chunk = in[i].shape(split) / count;
      const int64_t begin = chunk * static_cast<int64_t>(pos);
      Arrays parts;
      for (const auto& m : all) parts.push_back(slice_along(m[i], split, begin, begin + chunk));
      out.push_back(mx::concatenate(parts, concat));
    }
    return out;
  };
}

Kernel lower_collective_permute(LowerCtx& ctx) {
  const Mode mode = point_mode(ctx);
  const DeviceContext& d = ctx.device();
  if (ctx.num_in() != 1 || ctx.num_out() != 1 || ctx.in(0) != ctx.out(0))
    ctx.fail("expects one operand and a result of its type");
  const bool by_partition = mode == Mode::kCrossPartition;
  const int space = by_partition ? d.num_partitions : d.num_replicas;
  const int mine = by_partition ? d.partition : d.replica;
  auto logical = [&](int64_t id) {
    return by_partition ? d.replica * d.num_partitions + static_cast<int>(id)
                        : static_cast<int>(id) * d.num_partitions + d.partition;
  };
  std::vector<int64_t> pairs;
  if (ctx.inst().has("source_target_pairs")) pairs = ctx.inst().attr_dense_ints("source_target_pairs");
  if (pairs.size() % 2) ctx.fail("source_target_pairs must hold pairs");
  int64_t source = -1;
  std::vector<bool> is_source(space, false), is_target(space, false);
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    for (int k = 0; k < 2; ++k)
      if (pairs[i + k] < 0 || pairs[i + k] >= space)
        ctx.fail("pair (", pairs[i], ", ", pairs[i + 1], ") names an id outside 0..", space - 1);
    if (is_source[pairs[i]]) ctx.fail("id ", pairs[i], " is the source of two pairs");
    if (is_target[pairs[i + 1]]) ctx.fail("id ", pairs[i + 1], " is the target of two pairs");
    is_source[pairs[i]] = is_target[pairs[i + 1]] = true;
    if (pairs[i + 1] == mine) source = pairs[i];
  }
  // Everybody in the id space meets, senders and receivers alike (a
  // device that neither sends nor receives still passes the collective).
  Group g;
  g.me = d.logical();
  for (int id = 0; id < space; ++id) g.members.push_back(logical(id));
  for (size_t i = 0; i < g.members.size(); ++i)
    if (g.members[i] == g.me) g.pos = i;
  const int from = source < 0 ? -1 : static_cast<int>(source);
  if (space == 1) {
    if (from == 0) return identity_counting(ctx.device().logical());
    return [me = ctx.device().logical()](RunState& st, const Arrays& in) {
      if (st.collectives != nullptr) st.collectives->pass(st.collective_seq, me, in, "collective");
      ++st.collective_seq;
      return Arrays{mx::zeros_like(in[0])};
    };
  }
  return [g, from](RunState& st, const Arrays& in) {
    auto all = meet(st, g, in, "stablehlo.collective_permute");
    // A device no pair sends to gets zeros, as on XLA. A copy, so the
    // result never shares the sender's storage.
    if (from < 0) return Arrays{mx::zeros_like(in[0])};
    return Arrays{mx::copy(all[from][0])};
  };
}

Kernel lower_collective_broadcast(LowerCtx& ctx) {
  Group g = my_group(ctx, point_mode(ctx));
  if (ctx.num_in() != 1 || ctx.num_out() != 1 || ctx.in(0) != ctx.out(0))
    ctx.fail("expects one operand and a result of its type");
  if (g.size() == 1) return identity_counting(ctx.device().logical());
  return [g](RunState& st, const Arrays& in) {
    auto all = meet(st, g, in, "stablehlo.collective_broadcast");
    // The group's first member is the source.
    return Arrays{mx::copy(all[0][0])};
  };
}

Kernel lower_replica_id(LowerCtx& ctx) {
  mx::Dtype dt = to_mlx(ctx.out(0).dtype);
  const int id = ctx.device().replica;
  return [dt, id](RunState&, const Arrays&) { return Arrays{mx::array(id, dt)}; };
}

Kernel lower_partition_id(LowerCtx& ctx) {
  mx::Dtype dt = to_mlx(ctx.out(0).dtype);
  const int id = ctx.device().partition;
  return [dt, id](RunState&, const Arrays&) { return Arrays{mx::array(id, dt)}; };
}

Kernel lower_token(LowerCtx& ctx) {
  return [](RunState&, const Arrays&) { return Arrays{mx::array(false)}; };
}

}  // namespace

void register_collective_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::all_reduce, lower_all_reduce);
  r.add(Opcode::all_gather, lower_all_gather);
  r.add(Opcode::reduce_scatter, lower_reduce_scatter);
  r.add(Opcode::all_to_all, lower_all_to_all);
  r.add(Opcode::collective_broadcast, lower_collective_broadcast);
  r.add(Opcode::collective_permute, lower_collective_permute);
  r.add(Opcode::replica_id, lower_replica_id);
  r.add(Opcode::partition_id, lower_partition_id);
  r.add(Opcode::create_token, lower_token);
  r.add(Opcode::after_all, lower_token);
}

}  // namespace pjrtx::backend
