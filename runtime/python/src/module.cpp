// The extension module pipeplan._pipeplan (see binding.hpp for its parts) and the mapping of
// pipeplan's C++ exceptions to Python ones, each with the C++ message:
//   pipeplan::limit_exceeded, and split_error for memory (a sample or the model states do
//       not fit)                                 -> pipeplan.LimitExceeded (a RuntimeError)
//   invalid_argument, input_error (files), plan_error (an invalid plan), other split_errors
//                                                -> ValueError
//   any other pipeplan::error (e.g. an unwritable file)     -> RuntimeError
#include <exception>

#include "binding.hpp"
#include "pipeplan/batching/errors.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/validate.hpp"

namespace pipeplan::python {
namespace {

[[nodiscard]] bool is_memory_failure(batching::split_failure f) noexcept {
    return f == batching::split_failure::model_states || f == batching::split_failure::stored_memory ||
           f == batching::split_failure::peak_memory;
}

}  // namespace

void bind_errors(py::module_& m) {
    // Never destroyed: the type lives as long as the interpreter (a static object's destructor
    // would run after the interpreter is finalized).
    static auto* const limit_type = new py::exception<limit_exceeded>(m, "LimitExceeded", PyExc_RuntimeError);
    limit_type->doc() = "A plan does not fit a resource limit (device memory): the library's limit_exceeded, and a "
                        "split whose sample or model states exceed the memory.";
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const limit_exceeded& e) {
            PyErr_SetString(limit_type->ptr(), e.what());
        } catch (const batching::split_error& e) {
            PyErr_SetString(is_memory_failure(e.kind()) ? limit_type->ptr() : PyExc_ValueError, e.what());
        } catch (const invalid_argument& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const input_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const plan::plan_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const error& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        }
    });
}

}  // namespace pipeplan::python

PYBIND11_MODULE(_pipeplan, m) {
    m.doc() = "pipeplan's C++ planning library: cost models, the planner, execution plans and plan files";
    m.attr("__version__") = PIPEPLAN_VERSION;
    pipeplan::python::bind_errors(m);
    pipeplan::python::bind_plan_objects(m);
    pipeplan::python::bind_cost_models(m);
    pipeplan::python::bind_planner(m);
}
