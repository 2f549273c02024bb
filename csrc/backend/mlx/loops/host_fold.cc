#include "backend/mlx/loops/host_fold.h"

#include <mlx/ops.h>

#include <map>
#include <string>

#include "backend/mlx/dtype.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::Region;
using compiler::ValueId;

struct HostFold::Action {
  enum class Kind { kInst, kBind, kCall } kind = Kind::kInst;
  const Instruction* inst = nullptr;  // kInst, kCall
  ValueId dst = -1, src = -1;         // kBind: a callee's parameter and the call's operand
  const compiler::Function* callee = nullptr;  // kCall
};

namespace {

// Scalars (any shape of one element) of pred or a byte-or-wider integer type.
bool foldable_type(const compiler::TensorType& t) {
  return t.num_elements() == 1 && host_int::int_type(t.dtype);
}

using host_int::wrap;


// Whether the instruction folds when its operands are known: an
// element-wise op computed exactly here, or a broadcast or reshape, on one
// element.
bool foldable_inst(const compiler::Plan& plan, const Instruction& inst) {
  if (inst.op != Opcode::broadcast_in_dim && inst.op != Opcode::reshape &&
      !host_int::elementwise(plan, inst))
    return false;
  if (!inst.regions.empty() || inst.results.size() != 1 ||
      !foldable_type(plan.type(inst.results[0])))
    return false;
  for (ValueId v : inst.operands)
    if (!foldable_type(plan.type(v))) return false;
  return true;
}

Int128 eval(const compiler::Plan& plan, const Instruction& inst, Values& v) {
  if (inst.op == Opcode::broadcast_in_dim || inst.op == Opcode::reshape) return v[inst.operands[0]];
  Int128 x[3] = {0, 0, 0};
  for (size_t i = 0; i < inst.operands.size() && i < 3; ++i) x[i] = v[inst.operands[i]];
  return host_int::apply(plan, inst, x);
}
// Runs a callee that is all foldable work (HostFold::Analyzer checked it).
void eval_function(const compiler::Plan& plan, const compiler::Function& f,
                   const std::vector<ValueId>& operands, const std::vector<ValueId>& results,
                   Values& v, int depth = 0);

void eval_body(const compiler::Plan& plan, const Region& r, Values& v, int depth) {
  for (const Instruction& inst : r.body) {
    if (inst.op == Opcode::constant) continue;  // preloaded
    if (inst.op == Opcode::call) {
      eval_function(plan, *plan.find_function(inst.attr_str("callee")), inst.operands,
                    inst.results, v, depth + 1);
      continue;
    }
    v[inst.results[0]] = eval(plan, inst, v);
  }
}

void eval_function(const compiler::Plan& plan, const compiler::Function& f,
                   const std::vector<ValueId>& operands, const std::vector<ValueId>& results,
                   Values& v, int depth) {
  for (size_t i = 0; i < operands.size(); ++i) v[f.body.params[i]] = v[operands[i]];
  eval_body(plan, f.body, v, depth);
  for (size_t i = 0; i < results.size(); ++i) v[results[i]] = v[f.body.returns[i]];
}

void count_call_sites(const Region& r, std::map<std::string, int, std::less<>>& sites) {
  for (const Instruction& inst : r.body) {
    if (inst.op == Opcode::call) ++sites[inst.attr_str("callee", "")];
    for (const Region& sub : inst.regions) count_call_sites(sub, sites);
  }
}

}  // namespace

struct Analyzer {
  static constexpr int kMaxDepth = 8;
  const LowerCtx& ctx;
  const compiler::Plan& plan;
  HostFold& fold;
  std::vector<uint8_t> known;
  std::map<std::string, int, std::less<>> sites;
  std::map<const compiler::Function*, bool> all_foldable;

  std::optional<Int128> constant(ValueId v) {
    const auto& t = plan.type(v);
    if (!foldable_type(t)) return std::nullopt;
    auto c = ctx.constant_value(v);
    if (!c || c->size() != 1) return std::nullopt;
    if (t.dtype == DType::kPred) {
      mx::array b = mx::astype(*c, mx::int64);
      b.eval();
      return Int128{b.item<int64_t>() != 0};
    }
    return read_int(*c, t.dtype);
  }

  bool take_constant(const Instruction& inst) {
    auto c = constant(inst.results.at(0));
    if (!c) return false;
    known[inst.results[0]] = 1;
    fold.constants_.emplace_back(inst.results[0], *c);
    return true;
  }

  // Whether every instruction of `f` folds once its parameters are known.
  bool foldable_function(const compiler::Function* f, int depth) {
    if (f == nullptr || depth > kMaxDepth) return false;
    if (auto it = all_foldable.find(f); it != all_foldable.end()) return it->second;
    all_foldable[f] = false;  // recursion guard
    bool ok = true;
    for (ValueId p : f->body.params) ok = ok && foldable_type(plan.type(p));
    for (const Instruction& inst : f->body.body) {
      if (!ok) break;
      if (inst.op == Opcode::constant) {
        ok = take_constant(inst);
      } else if (inst.op == Opcode::call) {
        const compiler::Function* g = plan.find_function(inst.attr_str("callee", ""));
        ok = g != nullptr && g->body.params.size() == inst.operands.size() &&
             g->body.returns.size() == inst.results.size() && foldable_function(g, depth + 1);
      } else {
        ok = foldable_inst(plan, inst);
      }
    }
    all_foldable[f] = ok;
    return ok;
  }

  void fold_results(const Instruction& inst) {
    for (ValueId r : inst.results) known[r] = fold.skip_[r] = 1;
    ++fold.folded_count_;
  }

  void walk(const Region& r, int depth) {
    for (const Instruction& inst : r.body) {
      auto all_known = [&] {
        for (ValueId v : inst.operands)
          if (!known[v]) return false;
        return true;
      };
      if (inst.op == Opcode::constant) {
        take_constant(inst);
        continue;
      }
      if (inst.op == Opcode::call) {
        const compiler::Function* f = plan.find_function(inst.attr_str("callee", ""));
        if (f == nullptr || f->body.params.size() != inst.operands.size() ||
            f->body.returns.size() != inst.results.size() || depth >= kMaxDepth)
          continue;
        bool results_ok = true;
        for (ValueId v : inst.results) results_ok = results_ok && foldable_type(plan.type(v));
        if (results_ok && all_known() && foldable_function(f, depth + 1)) {
          fold.actions_.push_back({HostFold::Action::Kind::kCall, &inst, -1, -1, f});
          fold_results(inst);
          continue;
        }
        // A callee only this call runs: its parameters are the operands, so
        // the known ones stay known inside it.
        if (sites[inst.attr_str("callee", "")] != 1) continue;
        for (size_t i = 0; i < inst.operands.size(); ++i) {
          if (!known[inst.operands[i]]) continue;
          known[f->body.params[i]] = 1;
          fold.actions_.push_back({HostFold::Action::Kind::kBind, nullptr, f->body.params[i],
                                   inst.operands[i], nullptr});
        }
        walk(f->body, depth + 1);
        continue;
      }
      if (all_known() && foldable_inst(plan, inst)) {
        fold.actions_.push_back({HostFold::Action::Kind::kInst, &inst, -1, -1, nullptr});
        fold_results(inst);
      }
    }
  }

  // A folded operand k of a slice-like instruction that is one of its
  // start indices: the host clamps it too (HostFold::Start).
  void add_start(const Instruction& inst, size_t k) {
    size_t first = inst.op == Opcode::dynamic_slice ? 1 : 2;
    if (k < first) return;
    const compiler::TensorType& in = plan.type(inst.operands[0]);
    size_t d = k - first;
    if (d >= in.shape.size()) return;
    int64_t size;
    if (inst.op == Opcode::dynamic_slice) {
      auto sizes = inst.attr_ints("slice_sizes");
      if (d >= sizes.size()) return;
      size = sizes[d];
    } else {
      const compiler::TensorType& upd = plan.type(inst.operands[1]);
      if (d >= upd.shape.size()) return;
      size = upd.shape[d];
    }
    ValueId v = inst.operands[k];
    HostFold::Start s{v, plan.type(v).dtype, in.shape[d] - size};
    for (const HostFold::Start& t : fold.starts_)
      if (t.value == s.value && t.hi == s.hi) return;
    fold.starts_.push_back(s);
  }

  // Folded values read by an instruction that is not skipped, or returned
  // by a region: those enter the traced block as inputs.
  void find_inputs(const Region& r, std::vector<uint8_t>& needed) {
    for (const Instruction& inst : r.body) {
      bool skipped = !inst.results.empty() && fold.skip_[inst.results[0]];
      bool sliced = inst.op == Opcode::dynamic_slice || inst.op == Opcode::dynamic_update_slice;
      if (!skipped)
        for (size_t k = 0; k < inst.operands.size(); ++k) {
          if (!fold.skip_[inst.operands[k]]) continue;
          needed[inst.operands[k]] = 1;
          if (sliced) add_start(inst, k);
        }
      for (const Region& sub : inst.regions) find_inputs(sub, needed);
    }
    for (ValueId v : r.returns)
      if (fold.skip_[v]) needed[v] = 1;
  }
};

std::shared_ptr<const HostFold> HostFold::analyze(const LowerCtx& ctx, const Region& body,
                                                  const std::vector<size_t>& tracked) {
  if (tracked.empty()) return nullptr;
  const compiler::Plan& plan = ctx.plan();
  auto fold = std::make_shared<HostFold>();
  fold->plan_ = &plan;
  fold->skip_.assign(plan.values.size(), 0);
  Analyzer a{ctx, plan, *fold, std::vector<uint8_t>(plan.values.size(), 0), {}, {}};
  for (const compiler::Function& f : plan.functions) count_call_sites(f.body, a.sites);
  for (size_t index : tracked) {
    ValueId p = body.params.at(index);
    if (!foldable_type(plan.type(p))) return nullptr;
    fold->tracked_params_.push_back(p);
    a.known[p] = 1;
  }
  a.walk(body, 0);
  if (fold->folded_count_ == 0) return nullptr;
  std::vector<uint8_t> needed(plan.values.size(), 0);
  for (const compiler::Function& f : plan.functions) a.find_inputs(f.body, needed);
  for (size_t v = 0; v < needed.size(); ++v)
    if (needed[v]) fold->inputs_.push_back(static_cast<ValueId>(v));
  for (const auto& [v, c] : fold->constants_) fold->scratch_[v] = c;
  return fold;
}

Arrays HostFold::evaluate(const std::vector<Int128>& ivs) const {
  Values& v = scratch_;
  for (size_t k = 0; k < tracked_params_.size(); ++k)
    v[tracked_params_[k]] = wrap(ivs[k], plan_->type(tracked_params_[k]).dtype);
  for (const Action& act : actions_) {
    switch (act.kind) {
      case Action::Kind::kBind: v[act.dst] = v[act.src]; break;
      case Action::Kind::kCall:
        eval_function(*plan_, *act.callee, act.inst->operands, act.inst->results, v);
        break;
      case Action::Kind::kInst: v[act.inst->results[0]] = eval(*plan_, *act.inst, v); break;
    }
  }
  Arrays out;
  out.reserve(inputs_.size() + starts_.size());
  for (ValueId id : inputs_) {
    // Built with its shape (a reshape would be one more node per input).
    const compiler::TensorType& t = plan_->type(id);
    mx::Shape shape = to_mlx_shape(t.shape);
    if (t.dtype == DType::kPred) {
      bool b = v[id] != 0;
      out.emplace_back(&b, shape, mx::bool_);
    } else if (compiler::is_unsigned_int(t.dtype)) {
      uint64_t u = static_cast<uint64_t>(v[id]);
      out.emplace_back(&u, shape, to_mlx(t.dtype));
    } else {
      int64_t x = static_cast<int64_t>(v[id]);
      out.emplace_back(&x, shape, to_mlx(t.dtype));
    }
  }
  for (const Start& s : starts_) {
    int32_t x = host_int::clamp_index_value(v[s.value], s.dtype, s.hi);
    out.emplace_back(&x, mx::Shape{1}, mx::int32);
  }
  return out;
}

namespace {
struct Registered {
  std::uintptr_t index;
  int64_t hi;
  mx::array start;
};
thread_local std::vector<Registered> t_starts;
}  // namespace

HostClampedStarts::~HostClampedStarts() { t_starts.clear(); }

void HostClampedStarts::set(const HostFold& fold,
                            const std::vector<std::optional<mx::array>>& slots,
                            Arrays::const_iterator clamped) {
  t_starts.clear();
  for (const HostFold::Start& s : fold.starts()) {
    const auto& index = slots.at(s.value);
    if (index) t_starts.push_back({index->id(), s.hi, *clamped});
    ++clamped;
  }
}

std::optional<mx::array> host_clamped_start(const mx::array& index, int64_t hi) {
  for (const Registered& r : t_starts)
    if (r.index == index.id() && r.hi == hi) return r.start;
  return std::nullopt;
}

}  // namespace pjrtx::backend
