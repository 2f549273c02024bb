// The pieces of the nanobind module pjrtx._pjrtx, one function per file.
#pragma once

#include <nanobind/nanobind.h>

namespace pjrtx::python {

// Bumped whenever the Python package and the extension must change together
// (the frontend's use of PlanBuilder, attribute names). pjrtx/_contract.py
// holds the Python side's number.
inline constexpr int kContractVersion = 1;

void bind_abi(nanobind::module_& m);
void bind_plan(nanobind::module_& m);
void install_frontend_hook(nanobind::module_& m);
void install_callback_hook(nanobind::module_& m);
void install_lapack_hook(nanobind::module_& m);
void bind_cache(nanobind::module_& m);

}  // namespace pjrtx::python
