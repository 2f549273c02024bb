#include "backend/mlx/constant_products.h"

#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/mlx/plan_rewrite.h"
#include "compiler/dense_pool.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::Plan;
using compiler::Region;
using compiler::TensorType;
using compiler::ValueId;

namespace {

bool wide_real(DType t) { return t == DType::kF32 || t == DType::kF64; }

class Folder {
 public:
  explicit Folder(Plan& plan) : plan_(plan) {}

  bool changed() const { return changed_; }

  void rewrite(Region& r) {
    std::vector<Instruction> out;
    out.reserve(r.body.size());
    for (Instruction& inst : r.body) {
      for (Region& sub : inst.regions) rewrite(sub);
      if (inst.results.size() != 1 || !inst.regions.empty()) {
        out.push_back(std::move(inst));
        continue;
      }
      const ValueId self = inst.results[0];
      const DType t = plan_.type(self).dtype;
      if (wide_real(t)) {
        if (inst.op == Opcode::constant) note_constant(inst);
        if (inst.op == Opcode::broadcast_in_dim || inst.op == Opcode::reshape)
          if (auto c = splat(inst.operands[0])) splat_[self] = *c;
        if (inst.op == Opcode::negate)
          if (auto c = splat(inst.operands[0])) splat_[self] = -*c;
        if (inst.op == Opcode::multiply) {
          const auto a = splat(inst.operands[0]), b = splat(inst.operands[1]);
          if (a && b) {
            splat_[self] = round(t, *a * *b);  // constant folding, in t
          } else if (a || b) {
            // x * C with x = A * C1: A * fl(C1 * C), as XLA's simplifier.
            const ValueId x = a ? inst.operands[1] : inst.operands[0];
            const double c = a ? *a : *b;
            if (constant_.count(x)) {
              // An array constant times C: XLA's constant folding computes
              // it in the program's order, as pjrtx does.
            } else if (auto it = scaled_.find(x); it != scaled_.end()) {
              const double folded = round(t, it->second.second * c);
              const ValueId base = it->second.first;
              inst.operands = {base, splat_value(t, folded, plan_.type(self), inst.loc, &out)};
              changed_ = true;
              scaled_[self] = {base, folded};
            } else {
              scaled_[self] = {x, c};
            }
          }
        }
      }
      out.push_back(std::move(inst));
    }
    r.body = std::move(out);
  }

 private:
  // A constant's one value when it is a splat of a wide real type.
  void note_constant(const Instruction& inst) {
    constant_.insert(inst.results[0]);
    const compiler::DenseData& d = inst.attr_dense("value");
    const DType t = plan_.type(inst.results[0]).dtype;
    if (!d.splat && plan_.type(inst.results[0]).num_elements() != 1) return;
    if (t == DType::kF32 && d.bytes.size() >= 4) {
      float f;
      std::memcpy(&f, d.bytes.data(), 4);
      splat_[inst.results[0]] = f;
    } else if (t == DType::kF64 && d.bytes.size() >= 8) {
      double f;
      std::memcpy(&f, d.bytes.data(), 8);
      splat_[inst.results[0]] = f;
    }
  }

  std::optional<double> splat(ValueId v) const {
    auto it = splat_.find(v);
    return it == splat_.end() ? std::nullopt : std::optional<double>(it->second);
  }

  static double round(DType t, double v) { return t == DType::kF32 ? static_cast<double>(static_cast<float>(v)) : v; }

  // A new constant `value` of `type` (a scalar, broadcast where `type` has
  // a shape), appended to `out`. `type` by value: new values grow
  // plan_.values, which a reference into it would not survive.
  ValueId splat_value(DType t, double value, TensorType type, const std::string& loc,
                      std::vector<Instruction>* out) {
    TensorType scalar{t, {}};
    uint8_t bytes[8];
    size_t n = 8;
    if (t == DType::kF32) {
      const float f = static_cast<float>(value);
      std::memcpy(bytes, &f, 4);
      n = 4;
    } else {
      std::memcpy(bytes, &value, 8);
    }
    Instruction c;
    c.op = Opcode::constant;
    c.attrs["value"] = compiler::intern_dense_bytes(scalar, true, bytes, n);
    c.results = {new_value(scalar)};
    c.loc = loc;
    ValueId v = c.results[0];
    splat_[v] = value;
    out->push_back(std::move(c));
    if (type.shape.empty()) return v;
    Instruction b;
    b.op = Opcode::broadcast_in_dim;
    b.operands = {v};
    b.attrs["broadcast_dimensions"] = std::vector<int64_t>{};
    b.results = {new_value(type)};
    b.loc = loc;
    v = b.results[0];
    splat_[v] = value;
    out->push_back(std::move(b));
    return v;
  }

  ValueId new_value(const TensorType& t) {
    plan_.values.push_back(t);
    return static_cast<ValueId>(plan_.values.size() - 1);
  }

  Plan& plan_;
  // Results of constant ops of a wide real type.
  std::unordered_set<ValueId> constant_;
  // Values known to be one constant everywhere (after folding).
  std::unordered_map<ValueId, double> splat_;
  // Values that are A * C with A not a constant: A and C (folded).
  std::unordered_map<ValueId, std::pair<ValueId, double>> scaled_;
  bool changed_ = false;
};

}  // namespace

std::shared_ptr<const Plan> fold_constant_products(std::shared_ptr<const Plan> plan) {
  return rewrite_plan(std::move(plan), wide_real, [](Plan& copy) {
    Folder f(copy);
    for (compiler::Function& fn : copy.functions) f.rewrite(fn.body);
    return f.changed();
  });
}

}  // namespace pjrtx::backend
