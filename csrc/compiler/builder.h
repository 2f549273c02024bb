// PlanBuilder: the frontend's one way into the plan. It is fed in program
// order: functions, ops, and the regions of ops that have them.
//
//   auto args = b.begin_function("main", true, {f32[2]}, {f32[2]});
//   auto r = b.add_op("stablehlo.add", {args[0], args[0]}, {f32[2]}, {}, loc);
//   b.end_function(r);
//   Plan p = b.finish("main");
//
// An op with regions (reduce, while, ...) is added with num_regions > 0 and
// then gets exactly that many begin_region/end_region pairs before anything
// else is added to the enclosing region.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/plan.h"

namespace pjrtx::compiler {

class PlanBuilder {
 public:
  using Attrs = std::map<std::string, AttrValue, std::less<>>;

  std::vector<ValueId> begin_function(const std::string& name, bool is_public,
                                      const std::vector<TensorType>& arg_types,
                                      const std::vector<TensorType>& result_types);
  void end_function(const std::vector<ValueId>& returns);
  // Marks parameters of the open function as donatable (indices into its
  // parameters); throws INVALID_ARGUMENT for an index out of range.
  void set_donors(const std::vector<int64_t>& params);
  // Memory kinds of the open function's arguments and results (one per
  // argument / result, "" for none), from their `mhlo.memory_kind`.
  void set_memory_kinds(const std::vector<std::string>& args,
                        const std::vector<std::string>& results);

  // Throws INVALID_ARGUMENT "pjrtx: unsupported op <name> at <loc>" for ops
  // outside the opcode table.
  std::vector<ValueId> add_op(const std::string& name,
                              const std::vector<ValueId>& operands,
                              const std::vector<TensorType>& result_types,
                              Attrs attrs, const std::string& loc,
                              int num_regions = 0);
  std::vector<ValueId> begin_region(const std::vector<TensorType>& arg_types);
  void end_region(const std::vector<ValueId>& returns);

  // Verifies and hands over the plan; the builder is empty afterwards.
  Plan finish(const std::string& entry_name);

  const TensorType& type(ValueId v) const { return plan_.values.at(v); }

 private:
  struct Pending {
    Instruction* op;
    size_t regions_expected;
  };
  ValueId new_value(const TensorType& t);
  void check_value(ValueId v, const char* what) const;
  Region& current();

  Plan plan_;
  std::vector<Region*> regions_;
  std::vector<Pending> pending_;
  bool in_function_ = false;
};

}  // namespace pjrtx::compiler
