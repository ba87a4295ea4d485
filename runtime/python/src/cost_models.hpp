// The cost models as the Python module holds them (shared by the model and planner bindings):
// an analytic model owns the names its shape and hardware point to; the planner keeps the
// Python model object alive for as long as it plans with it.
#pragma once

#include <optional>
#include <string>

#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/profile.hpp"

namespace pipeplan::python {

struct analytic_model_py {
    std::string shape_name, hardware_name;     ///< what model->shape().name / hardware().name view
    std::optional<analytic_cost_model> model;  ///< set once the names above are in place
};

struct profile_model_py {
    profile_cost_model model;
};

}  // namespace pipeplan::python
