#include "backend/mlx/widen.h"

#include <map>
#include <set>

#include "backend/mlx/plan_rewrite.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::Plan;
using compiler::Region;
using compiler::ValueId;

namespace {

// Ops whose lowerings move or reinterpret bytes without reading them as
// numbers; convert reads small floats itself (ops/convert.cc). select is not
// one: XLA:CPU widens it too, so a selected e5m2 NaN comes out as 0x7f.
bool moves_bytes(Opcode op) {
  switch (op) {
    case Opcode::constant: case Opcode::reshape: case Opcode::transpose:
    case Opcode::broadcast: case Opcode::broadcast_in_dim: case Opcode::slice:
    case Opcode::dynamic_slice: case Opcode::dynamic_update_slice:
    case Opcode::concatenate: case Opcode::reverse: case Opcode::gather:
    case Opcode::pad: case Opcode::bitcast_convert:
    case Opcode::convert: case Opcode::tuple: case Opcode::get_tuple_element:
    case Opcode::optimization_barrier: case Opcode::call: case Opcode::composite:
    case Opcode::while_: case Opcode::case_: case Opcode::if_:
    case Opcode::custom_call: case Opcode::all_gather: case Opcode::all_to_all:
    case Opcode::collective_permute: case Opcode::collective_broadcast:
    case Opcode::get_dimension_size: case Opcode::after_all: case Opcode::create_token:
    case Opcode::infeed: case Opcode::outfeed: case Opcode::send: case Opcode::recv:
    case Opcode::sdy_sharding_constraint: case Opcode::sdy_reshard:
      return true;
    default:
      return false;
  }
}

class Widener {
 public:
  explicit Widener(Plan& plan) : plan_(plan) {}

  void rewrite(Region& r) {
    std::vector<Instruction> body;
    body.reserve(r.body.size());
    for (Instruction& inst : r.body) {
      if (moves_bytes(inst.op) || !touches_small_float(inst)) {
        for (Region& sub : inst.regions) rewrite(sub);
        body.push_back(std::move(inst));
        continue;
      }
      for (ValueId& v : inst.operands) {
        if (!compiler::is_small_float(plan_.values[v].dtype)) continue;
        ValueId w = new_wide_like(v);
        body.push_back(convert(v, w, inst.loc));
        v = w;
      }
      // Values a region reads from outside (the frontend hoists constants
      // such as a comparator's canonical NaN) get their own converts here.
      std::set<ValueId> defined;
      for (const Region& sub : inst.regions) collect_defined(sub, defined);
      std::map<ValueId, ValueId> captured;
      for (const Region& sub : inst.regions) collect_captured(sub, defined, captured);
      for (auto& [v, w] : captured) {
        w = new_wide_like(v);
        body.push_back(convert(v, w, inst.loc));
      }
      for (Region& sub : inst.regions) {
        retype(sub);
        if (!captured.empty()) substitute(sub, captured);
      }
      std::vector<Instruction> after;
      for (ValueId& v : inst.results) {
        if (!compiler::is_small_float(plan_.values[v].dtype)) continue;
        ValueId w = new_wide_like(v);
        after.push_back(convert(w, v, inst.loc));
        v = w;
      }
      body.push_back(std::move(inst));
      for (Instruction& c : after) body.push_back(std::move(c));
    }
    r.body = std::move(body);
  }

 private:
  bool small(ValueId v) const { return compiler::is_small_float(plan_.values[v].dtype); }

  bool touches_small_float(const Instruction& inst) const {
    for (ValueId v : inst.operands) if (small(v)) return true;
    for (ValueId v : inst.results) if (small(v)) return true;
    for (const Region& sub : inst.regions)
      for (ValueId v : sub.params) if (small(v)) return true;
    return false;
  }

  static void collect_defined(const Region& r, std::set<ValueId>& out) {
    out.insert(r.params.begin(), r.params.end());
    for (const Instruction& inst : r.body) {
      out.insert(inst.results.begin(), inst.results.end());
      for (const Region& sub : inst.regions) collect_defined(sub, out);
    }
  }
  void collect_captured(const Region& r, const std::set<ValueId>& defined,
                        std::map<ValueId, ValueId>& out) const {
    auto see = [&](ValueId v) {
      if (small(v) && !defined.count(v)) out.emplace(v, v);
    };
    for (const Instruction& inst : r.body) {
      for (ValueId v : inst.operands) see(v);
      for (const Region& sub : inst.regions) collect_captured(sub, defined, out);
    }
    for (ValueId v : r.returns) see(v);
  }
  static void substitute(Region& r, const std::map<ValueId, ValueId>& m) {
    auto sub = [&](ValueId& v) {
      if (auto it = m.find(v); it != m.end()) v = it->second;
    };
    for (Instruction& inst : r.body) {
      for (ValueId& v : inst.operands) sub(v);
      for (Region& nested : inst.regions) substitute(nested, m);
    }
    for (ValueId& v : r.returns) sub(v);
  }

  // A region of a widened op computes wide throughout: its params and
  // every value it defines change type in place (ids stay).
  void retype(Region& r) {
    for (ValueId v : r.params) widen_type(v);
    // A constant keeps its bytes and gets a convert behind it; later uses
    // read the wide value.
    std::map<ValueId, ValueId> consts;
    std::vector<Instruction> body;
    for (Instruction& inst : r.body) {
      if (!consts.empty()) {
        for (ValueId& v : inst.operands)
          if (auto it = consts.find(v); it != consts.end()) v = it->second;
        for (Region& sub : inst.regions) substitute(sub, consts);
      }
      if (inst.op == Opcode::constant && inst.results.size() == 1 && small(inst.results[0])) {
        ValueId v = inst.results[0], w = new_wide_like(v);
        consts[v] = w;
        std::string loc = inst.loc;
        body.push_back(std::move(inst));
        body.push_back(convert(v, w, loc));
        continue;
      }
      for (ValueId v : inst.results) widen_type(v);
      for (Region& sub : inst.regions) retype(sub);
      body.push_back(std::move(inst));
    }
    r.body = std::move(body);
    for (ValueId& v : r.returns)
      if (auto it = consts.find(v); it != consts.end()) v = it->second;
  }
  void widen_type(ValueId v) {
    if (small(v)) plan_.values[v].dtype = wide_type(plan_.values[v].dtype);
  }

  // XLA:CPU computes small floats in f16 (its HLO shows convert -> f16 add
  // -> convert), which rounds a product of two e4m3 values twice; f16 cannot
  // hold e8m0's range (2^-127 .. 2^127), so that one goes to f32.
  static DType wide_type(DType t) { return t == DType::kF8E8M0FNU ? DType::kF32 : DType::kF16; }

  ValueId new_wide_like(ValueId v) {
    compiler::TensorType t = plan_.values[v];
    t.dtype = wide_type(t.dtype);
    plan_.values.push_back(t);
    return static_cast<ValueId>(plan_.values.size() - 1);
  }

  static Instruction convert(ValueId from, ValueId to, const std::string& loc) {
    Instruction c;
    c.op = Opcode::convert;
    c.operands = {from};
    c.results = {to};
    c.loc = loc;
    return c;
  }

  Plan& plan_;
};

}  // namespace

std::shared_ptr<const Plan> widen_small_floats(std::shared_ptr<const Plan> plan) {
  return rewrite_plan(std::move(plan), compiler::is_small_float, [](Plan& copy) {
    Widener w(copy);
    for (compiler::Function& f : copy.functions) w.rewrite(f.body);
    return true;
  });
}

}  // namespace pjrtx::backend
