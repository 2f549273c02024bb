#include "compiler/verifier.h"

#include <vector>

#include "common/error.h"

namespace pjrtx::compiler {

namespace {

// Expected region count; -1 means "one or more" (case).
int expected_regions(Opcode op) {
  switch (op) {
    case Opcode::reduce:
    case Opcode::reduce_window:
    case Opcode::sort:
    case Opcode::scatter:
    case Opcode::map:
    case Opcode::all_reduce:
    case Opcode::reduce_scatter:
      return 1;
    case Opcode::select_and_scatter:
    case Opcode::while_:
    case Opcode::if_:
      return 2;
    case Opcode::case_:
      return -1;
    default:
      return 0;
  }
}

bool is_elementwise_binary(Opcode op) {
  switch (op) {
    case Opcode::add: case Opcode::subtract: case Opcode::multiply:
    case Opcode::divide: case Opcode::remainder: case Opcode::power:
    case Opcode::maximum: case Opcode::minimum: case Opcode::atan2:
    case Opcode::and_: case Opcode::or_: case Opcode::xor_:
    case Opcode::shift_left: case Opcode::shift_right_arithmetic:
    case Opcode::shift_right_logical:
      return true;
    default:
      return false;
  }
}

class Verifier {
 public:
  explicit Verifier(const Plan& p) : plan_(p), defined_(p.values.size(), false) {}

  void function(const Function& f) {
    region(f.body, nullptr);
    if (f.body.returns.size() != f.result_types.size())
      invalid_argument("pjrtx: function @", f.name, " returns ",
                       f.body.returns.size(), " values but declares ",
                       f.result_types.size());
    for (size_t i = 0; i < f.result_types.size(); ++i)
      if (plan_.type(f.body.returns[i]) != f.result_types[i])
        invalid_argument("pjrtx: function @", f.name, " result ", i, " is ",
                         plan_.type(f.body.returns[i]).str(), " but declared ",
                         f.result_types[i].str());
  }

 private:
  void define(ValueId v, const Instruction* at) {
    if (v < 0 || static_cast<size_t>(v) >= defined_.size())
      fail(at, "defines unknown value %", v);
    if (defined_[v]) fail(at, "redefines value %", v);
    defined_[v] = true;
    live_.push_back(v);
  }
  void use(ValueId v, const Instruction* at) {
    if (v < 0 || static_cast<size_t>(v) >= defined_.size() || !defined_[v])
      fail(at, "uses value %", v, " before its definition");
  }
  template <typename... Args>
  [[noreturn]] void fail(const Instruction* at, const Args&... args) {
    invalid_argument("[", at ? opcode_name(at->op) : "func", "] ", args...,
                     at && !at->loc.empty() ? " at " : "",
                     at ? at->loc : std::string());
  }

  void region(const Region& r, const Instruction* owner) {
    size_t mark = live_.size();
    for (ValueId v : r.params) define(v, owner);
    for (const auto& inst : r.body) instruction(inst);
    for (ValueId v : r.returns) use(v, owner);
    // Values of a region are not visible after it.
    while (live_.size() > mark) {
      defined_[live_.back()] = false;
      live_.pop_back();
    }
    // ...but they stay unique: mark them as seen for the redefinition check.
  }

  void instruction(const Instruction& inst) {
    for (ValueId v : inst.operands) use(v, &inst);
    int want = expected_regions(inst.op);
    int have = static_cast<int>(inst.regions.size());
    if ((want >= 0 && have != want) || (want < 0 && have < 1))
      fail(&inst, "expects ", want < 0 ? "at least 1" : std::to_string(want),
           " regions, has ", have);
    if (is_elementwise_binary(inst.op)) {
      if (inst.operands.size() != 2 || inst.results.size() != 1)
        fail(&inst, "expects 2 operands and 1 result");
      const auto& a = plan_.type(inst.operands[0]);
      const auto& b = plan_.type(inst.operands[1]);
      const auto& r = plan_.type(inst.results[0]);
      if (a.shape != b.shape || a.shape != r.shape)
        fail(&inst, "operand shapes differ: ", a.str(), ", ", b.str(), " -> ",
             r.str());
    }
    if (inst.op == Opcode::fused_multiply_add) {
      // a * b + c rounded once (backend/mlx/fma_contract.h makes these).
      if (inst.operands.size() != 3 || inst.results.size() != 1)
        fail(&inst, "expects 3 operands and 1 result");
      const auto& r = plan_.type(inst.results[0]);
      for (ValueId v : inst.operands)
        if (plan_.type(v) != r)
          fail(&inst, "operand ", plan_.type(v).str(), " is not the result's ", r.str());
    }
    for (const auto& sub : inst.regions) region(sub, &inst);
    for (ValueId v : inst.results) define(v, &inst);
  }

  const Plan& plan_;
  std::vector<bool> defined_;
  std::vector<ValueId> live_;
};

}  // namespace

void verify(const Plan& plan) {
  for (const auto& f : plan.functions) Verifier(plan).function(f);
}

}  // namespace pjrtx::compiler
