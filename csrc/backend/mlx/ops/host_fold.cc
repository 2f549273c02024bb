#include "backend/mlx/ops/host_fold.h"

#include <mlx/ops.h>

#include <map>
#include <string>

#include "backend/mlx/dtype.h"
#include "common/error.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::Region;
using compiler::ValueId;
using U128 = unsigned __int128;

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

int bits_of(DType t) { return t == DType::kPred ? 1 : compiler::dtype_bits(t); }

U128 low_bits(Int128 v, int bits) {
  U128 u = static_cast<U128>(v);
  return bits < 128 ? u & ((U128{1} << bits) - 1) : u;
}

Int128 sign_extend(U128 u, int bits) {
  Int128 s = static_cast<Int128>(u);
  if ((u >> (bits - 1)) & 1) s -= Int128{1} << bits;
  return s;
}

Int128 signed_min(DType t) { return -(Int128{1} << (compiler::dtype_bits(t) - 1)); }

}  // namespace

namespace host_int {

bool int_type(DType t) {
  if (t == DType::kPred) return true;
  return compiler::is_integer(t) && !compiler::is_subbyte_int(t) && compiler::dtype_bits(t) <= 64;
}

Int128 wrap(Int128 v, DType t) {
  if (t == DType::kPred) return v != 0;
  U128 u = low_bits(v, compiler::dtype_bits(t));
  return compiler::is_signed_int(t) ? sign_extend(u, compiler::dtype_bits(t))
                                    : static_cast<Int128>(u);
}

namespace {

bool elementwise_op(Opcode op) {
  switch (op) {
    case Opcode::add: case Opcode::subtract: case Opcode::multiply: case Opcode::divide:
    case Opcode::remainder: case Opcode::negate: case Opcode::abs: case Opcode::minimum:
    case Opcode::maximum: case Opcode::and_: case Opcode::or_: case Opcode::xor_:
    case Opcode::not_: case Opcode::compare: case Opcode::select: case Opcode::convert:
    case Opcode::clamp: case Opcode::shift_left: case Opcode::shift_right_logical:
    case Opcode::shift_right_arithmetic:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool elementwise(const compiler::Plan& plan, const Instruction& inst) {
  if (!elementwise_op(inst.op) || !inst.regions.empty() || inst.results.size() != 1) return false;
  if (!int_type(plan.type(inst.results[0]).dtype)) return false;
  for (ValueId v : inst.operands)
    if (!int_type(plan.type(v).dtype)) return false;
  const DType t = plan.type(inst.results[0]).dtype;
  const bool pred = t == DType::kPred;
  switch (inst.op) {
    case Opcode::divide: case Opcode::remainder: case Opcode::negate: case Opcode::abs:
    case Opcode::shift_left: case Opcode::shift_right_logical:
    case Opcode::shift_right_arithmetic:
      return !pred;
    case Opcode::compare: {
      if (inst.operands.size() != 2) return false;
      DType a = plan.type(inst.operands[0]).dtype;
      std::string ct = inst.attr_str("compare_type", "");
      if (ct.empty()) return true;
      if (ct == "SIGNED") return compiler::is_signed_int(a);
      if (ct == "UNSIGNED") return a == DType::kPred || compiler::is_unsigned_int(a);
      return false;  // FLOAT, TOTALORDER
    }
    default:
      return true;
  }
}

Int128 apply(const compiler::Plan& plan, const Instruction& inst, const Int128* x) {
  const DType t = plan.type(inst.results[0]).dtype;
  const bool pred = t == DType::kPred;
  auto in = [&](size_t i) { return x[i]; };
  switch (inst.op) {
    case Opcode::add:
      return pred ? (in(0) | in(1)) : wrap(static_cast<Int128>(static_cast<U128>(in(0)) +
                                                               static_cast<U128>(in(1))), t);
    case Opcode::subtract:
      return pred ? Int128{in(0) != in(1)}
                  : wrap(static_cast<Int128>(static_cast<U128>(in(0)) - static_cast<U128>(in(1))), t);
    case Opcode::multiply:
      return pred ? (in(0) & in(1)) : wrap(static_cast<Int128>(static_cast<U128>(in(0)) *
                                                               static_cast<U128>(in(1))), t);
    case Opcode::divide: {
      Int128 x = in(0), y = in(1);
      if (y == 0) return wrap(-1, t);  // all ones, signed or not
      if (compiler::is_signed_int(t) && x == signed_min(t) && y == -1) return x;
      return x / y;  // truncates, as XLA's does
    }
    case Opcode::remainder: {
      Int128 x = in(0), y = in(1);
      if (y == 0) return x;
      if (compiler::is_signed_int(t) && x == signed_min(t) && y == -1) return 0;
      return x % y;  // the dividend's sign
    }
    case Opcode::negate: return wrap(-in(0), t);
    case Opcode::abs: return wrap(in(0) < 0 ? -in(0) : in(0), t);
    case Opcode::minimum: return in(0) < in(1) ? in(0) : in(1);
    case Opcode::maximum: return in(0) > in(1) ? in(0) : in(1);
    case Opcode::and_: return wrap(in(0) & in(1), t);
    case Opcode::or_: return wrap(in(0) | in(1), t);
    case Opcode::xor_: return wrap(in(0) ^ in(1), t);
    case Opcode::not_: return pred ? Int128{in(0) == 0} : wrap(~in(0), t);
    case Opcode::compare: {
      const std::string& d = inst.attr_str("comparison_direction");
      Int128 a = in(0), b = in(1);
      if (d == "EQ") return a == b;
      if (d == "NE") return a != b;
      if (d == "LT") return a < b;
      if (d == "LE") return a <= b;
      if (d == "GT") return a > b;
      if (d == "GE") return a >= b;
      throw Error(ErrorCode::kInternal, "pjrtx: host integer op: comparison_direction " + d);
    }
    case Opcode::select: return in(0) != 0 ? in(1) : in(2);
    case Opcode::convert: return wrap(in(0), t);
    case Opcode::clamp: {  // clamp(min, operand, max)
      Int128 x = in(1) < in(0) ? in(0) : in(1);
      return x > in(2) ? in(2) : x;
    }
    case Opcode::shift_left: case Opcode::shift_right_logical:
    case Opcode::shift_right_arithmetic: {
      // A count outside [0, bits), read as unsigned, gives 0 or the sign fill.
      const int bits = bits_of(t);
      U128 count = low_bits(in(1), bits);
      Int128 x = in(0);
      if (inst.op == Opcode::shift_left)
        return count >= static_cast<U128>(bits) ? 0 : wrap(static_cast<Int128>(low_bits(x, bits) << count), t);
      if (inst.op == Opcode::shift_right_logical)
        return count >= static_cast<U128>(bits) ? 0 : wrap(static_cast<Int128>(low_bits(x, bits) >> count), t);
      Int128 s = sign_extend(low_bits(x, bits), bits);  // unsigned values shift in their top bit
      if (count >= static_cast<U128>(bits)) return wrap(s < 0 ? -1 : 0, t);
      return wrap(s >> static_cast<int>(count), t);
    }
    default:
      throw Error(ErrorCode::kInternal, std::string("pjrtx: host integer op: unexpected ") +
                                            std::string(compiler::opcode_name(inst.op)));
  }
}

}  // namespace host_int

namespace {

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

  // Folded values read by an instruction that is not skipped, or returned
  // by a region: those enter the traced block as inputs.
  void find_inputs(const Region& r, std::vector<uint8_t>& needed) {
    for (const Instruction& inst : r.body) {
      bool skipped = !inst.results.empty() && fold.skip_[inst.results[0]];
      if (!skipped)
        for (ValueId v : inst.operands)
          if (fold.skip_[v]) needed[v] = 1;
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
  out.reserve(inputs_.size());
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
  return out;
}

}  // namespace pjrtx::backend
