// The pybind11 binding of pipeplan (the extension pipeplan._pipeplan): what its parts share.
// Each part binds one slice of the headers, with no planning logic of its own:
//   module.cpp        the module, its constants and the exception mapping
//   plan_objects.cpp  plan/plan.hpp's objects, plan files (binary and JSON), validation, export
//   planner.cpp       cost models (analytic, profile) and plan/planner.hpp's planner
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // every part converts the same STL types: include them everywhere
#include <pybind11/stl/filesystem.h>

#include "pipeplan/plan/plan.hpp"

namespace pipeplan::python {

namespace py = pybind11;

/// A micro-batch as Python sees it: the plan's micro-batch table entry, plus the packed rows
/// (sample ids per row) that the planner's split chose; plan files do not store rows, so a
/// micro-batch read from a plan has none.
struct microbatch_view {
    plan::microbatch_entry entry;
    std::vector<std::vector<int>> rows;
};

/// The views of a header's micro-batch table (no rows).
[[nodiscard]] std::vector<microbatch_view> microbatch_views(const plan::plan_header& h);

void bind_errors(py::module_& m);
void bind_plan_objects(py::module_& m);
void bind_cost_models(py::module_& m);
void bind_planner(py::module_& m);

}  // namespace pipeplan::python
