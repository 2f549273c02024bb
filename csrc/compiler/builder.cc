#include "compiler/builder.h"

#include "common/error.h"
#include "compiler/verifier.h"

#include <cstdint>

namespace pjrtx::compiler {

ValueId PlanBuilder::new_value(const TensorType& t) {
  if (t.dtype == DType::kInvalid)
    invalid_argument("pjrtx: value of unsupported element type");
  for (int64_t d : t.shape)
    if (d < 0) invalid_argument("pjrtx: dynamic shapes are not supported: ", t.str());
  plan_.values.push_back(t);
  return static_cast<ValueId>(plan_.values.size() - 1);
}

void PlanBuilder::check_value(ValueId v, const char* what) const {
  if (v < 0 || static_cast<size_t>(v) >= plan_.values.size())
    invalid_argument("pjrtx: plan builder: unknown value %", v, " in ", what);
}

Region& PlanBuilder::current() {
  if (regions_.empty())
    failed_precondition("pjrtx: plan builder: no open function or region");
  if (!pending_.empty()) {
    // The innermost op with regions still waits for some: only its own open
    // region may receive ops.
    const Instruction* op = pending_.back().op;
    if (op->regions.empty() || regions_.back() != &op->regions.back())
      failed_precondition("pjrtx: plan builder: ", op->where(), " expects ",
                          pending_.back().regions_expected, " regions, got ",
                          op->regions.size());
  }
  return *regions_.back();
}

std::vector<ValueId> PlanBuilder::begin_function(
    const std::string& name, bool is_public,
    const std::vector<TensorType>& arg_types,
    const std::vector<TensorType>& result_types) {
  if (in_function_)
    failed_precondition("pjrtx: plan builder: nested function ", name);
  Function f;
  f.name = name;
  f.is_public = is_public;
  f.result_types = result_types;
  for (const auto& t : arg_types) f.body.params.push_back(new_value(t));
  plan_.functions.push_back(std::move(f));
  in_function_ = true;
  regions_.push_back(&plan_.functions.back().body);
  return plan_.functions.back().body.params;
}

void PlanBuilder::set_memory_kinds(const std::vector<std::string>& args,
                                   const std::vector<std::string>& results) {
  if (!in_function_) failed_precondition("pjrtx: plan builder: set_memory_kinds outside a function");
  Function& f = plan_.functions.back();
  if (args.size() != f.body.params.size() || results.size() != f.result_types.size())
    invalid_argument("pjrtx: plan builder: @", f.name, " has ", f.body.params.size(),
                     " arguments and ", f.result_types.size(), " results; got memory kinds for ",
                     args.size(), " and ", results.size());
  f.arg_memory_kinds = args;
  f.result_memory_kinds = results;
}

void PlanBuilder::end_function(const std::vector<ValueId>& returns) {
  if (!in_function_ || regions_.size() != 1 || !pending_.empty())
    failed_precondition("pjrtx: plan builder: end_function with open regions");
  for (ValueId v : returns) check_value(v, "return");
  regions_.back()->returns = returns;
  regions_.clear();
  in_function_ = false;
}

std::vector<ValueId> PlanBuilder::add_op(const std::string& name,
                                         const std::vector<ValueId>& operands,
                                         const std::vector<TensorType>& result_types,
                                         Attrs attrs, const std::string& loc,
                                         int num_regions) {
  auto op = parse_opcode(name);
  if (!op)
    invalid_argument("pjrtx: unsupported op ", name,
                     loc.empty() ? "" : " at ", loc);
  Region& region = current();
  for (ValueId v : operands) check_value(v, name.c_str());
  Instruction inst;
  inst.op = *op;
  inst.operands = operands;
  inst.attrs = std::move(attrs);
  inst.loc = loc;
  for (const auto& t : result_types) inst.results.push_back(new_value(t));
  inst.regions.reserve(num_regions);
  region.body.push_back(std::move(inst));
  if (num_regions > 0)
    pending_.push_back({&region.body.back(), static_cast<size_t>(num_regions)});
  return region.body.back().results;
}

std::vector<ValueId> PlanBuilder::begin_region(
    const std::vector<TensorType>& arg_types) {
  if (pending_.empty())
    failed_precondition("pjrtx: plan builder: begin_region without an op that has regions");
  Pending& p = pending_.back();
  if (p.op->regions.size() >= p.regions_expected ||
      (!p.op->regions.empty() && regions_.back() == &p.op->regions.back()))
    failed_precondition("pjrtx: plan builder: too many regions for ", p.op->where());
  p.op->regions.emplace_back();
  Region& r = p.op->regions.back();
  for (const auto& t : arg_types) r.params.push_back(new_value(t));
  regions_.push_back(&r);
  return r.params;
}

void PlanBuilder::end_region(const std::vector<ValueId>& returns) {
  if (pending_.empty() || regions_.size() < 2 ||
      regions_.back() != &pending_.back().op->regions.back())
    failed_precondition("pjrtx: plan builder: end_region without begin_region");
  for (ValueId v : returns) check_value(v, "region return");
  regions_.back()->returns = returns;
  regions_.pop_back();
  if (pending_.back().op->regions.size() == pending_.back().regions_expected)
    pending_.pop_back();
}

void PlanBuilder::set_donors(const std::vector<int64_t>& params) {
  if (!in_function_) failed_precondition("pjrtx: plan builder: set_donors outside a function");
  Function& f = plan_.functions.back();
  f.donors.assign(f.body.params.size(), false);
  for (int64_t i : params) {
    if (i < 0 || i >= static_cast<int64_t>(f.donors.size()))
      invalid_argument("pjrtx: @", f.name, ": donated argument ", i, " out of range (",
                       f.donors.size(), " arguments)");
    f.donors[i] = true;
  }
}

Plan PlanBuilder::finish(const std::string& entry_name) {
  if (in_function_)
    failed_precondition("pjrtx: plan builder: finish with an open function");
  for (size_t i = 0; i < plan_.functions.size(); ++i)
    if (plan_.functions[i].name == entry_name) plan_.entry = static_cast<int>(i);
  if (plan_.entry < 0)
    invalid_argument("pjrtx: the module has no function @", entry_name);
  verify(plan_);
  Plan out = std::move(plan_);
  plan_ = Plan();
  return out;
}

}  // namespace pjrtx::compiler
