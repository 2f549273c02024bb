// The frame of a plan pass (widen, constant products, multiply-add
// contraction): a rewritten copy where the pass changes something, else
// the plan itself, and no copy at all where no value has a type it
// rewrites.
#pragma once

#include <memory>

#include "compiler/plan.h"

namespace pjrtx::backend {

// `wanted(dtype)`: a value of this type may be rewritten; `pass(copy)`
// rewrites the copy in place and returns whether it changed it.
template <class Wanted, class Pass>
std::shared_ptr<const compiler::Plan> rewrite_plan(std::shared_ptr<const compiler::Plan> plan, Wanted wanted,
                                                   Pass pass) {
  bool any = false;
  for (const auto& t : plan->values) any = any || wanted(t.dtype);
  if (!any) return plan;
  auto copy = std::make_shared<compiler::Plan>(*plan);
  return pass(*copy) ? std::shared_ptr<const compiler::Plan>(std::move(copy)) : plan;
}

}  // namespace pjrtx::backend
