// plan/plan.hpp's objects as read-only Python objects, plan files in both formats, validation
// and the torch CSV export. Attribute names follow the C++ fields (slot fields as in_slot,
// out_slot, ...; an unused slot is None, an absent peer -1); enums are their names as plan
// files spell them.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <bit>

#include <pybind11/numpy.h>
#include <pybind11/operators.h>

#include "binding.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/plan/plan_file.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"

namespace pipeplan::python {

std::vector<microbatch_view> microbatch_views(const plan::plan_header& h) {
    std::vector<microbatch_view> out;
    out.reserve(h.microbatches.size());
    for (const auto& e : h.microbatches) out.push_back(microbatch_view{e, {}});
    return out;
}

namespace {

using plan::execution_plan;
using plan::instruction;
using plan::rank_plan;

[[nodiscard]] std::optional<std::uint32_t> slot(std::uint32_t s) {
    return s == plan::no_slot ? std::nullopt : std::optional<std::uint32_t>(s);
}

/// "binary" -> true, "json" -> false; ValueError otherwise.
[[nodiscard]] bool is_binary_format(std::string_view format) {
    if (format == "binary") return true;
    if (format == "json") return false;
    throw invalid_argument("unknown plan format '" + std::string(format) + "' (valid: binary, json)");
}

template <class Plan>
[[nodiscard]] py::bytes plan_bytes(const Plan& p, std::string_view format) {
    return py::bytes(is_binary_format(format) ? plan::to_binary(p) : plan::to_json_text(p));
}

template <class Plan>
void write_plan_file(const Plan& p, const std::filesystem::path& path, std::string_view format) {
    const std::string text = is_binary_format(format) ? plan::to_binary(p) : plan::to_json_text(p);
    write_file_atomically(path, text);
}

/// validate()'s Python form: the report, or ValueError with the validator's text.
[[nodiscard]] plan::validation_report checked(plan::validation_report r, bool raise_error) {
    if (raise_error && !r.ok()) throw invalid_argument("invalid plan:\n" + r.to_string());
    return r;
}

/// The NumPy structured dtype of one instruction (the C++ record's layout, field by field).
[[nodiscard]] py::dtype instruction_dtype() {
    py::list names, formats, offsets;
    const auto add = [&](const char* name, const char* format, std::size_t offset) {
        names.append(name);
        formats.append(format);
        offsets.append(offset);
    };
    const std::size_t shape = offsetof(instruction, shape);
    add("kind", "u1", offsetof(instruction, kind));
    add("mode", "u1", offsetof(instruction, mode));
    add("dtype", "u1", offsetof(instruction, type));
    add("microbatch", "<u4", offsetof(instruction, microbatch));
    add("stage", "<u4", offsetof(instruction, stage));
    add("peer", "<i4", offsetof(instruction, peer));
    add("in_slot", "<u4", offsetof(instruction, in));
    add("out_slot", "<u4", offsetof(instruction, out));
    add("stash_slot", "<u4", offsetof(instruction, stash));
    add("work_slot", "<u4", offsetof(instruction, work));
    add("microbatch_size", "<u4", shape + offsetof(plan::tensor_shape, microbatch_size));
    add("seqlen", "<u4", shape + offsetof(plan::tensor_shape, seqlen));
    add("dec_seqlen", "<u4", shape + offsetof(plan::tensor_shape, dec_seqlen));
    add("hidden", "<u4", shape + offsetof(plan::tensor_shape, hidden));
    add("bytes", "<u8", offsetof(instruction, bytes));
    add("clock_mhz", "<u8", offsetof(instruction, clock_mhz));
    py::dict spec;
    spec["names"] = names;
    spec["formats"] = formats;
    spec["offsets"] = offsets;
    spec["itemsize"] = sizeof(instruction);
    return py::dtype::from_args(spec);
}

[[nodiscard]] py::array instructions_array(const plan::rank_program& p) {
    static_assert(std::endian::native == std::endian::little, "the dtype is little-endian");
    const py::dtype dt = instruction_dtype();
    return py::array(dt, {p.instructions.size()}, {sizeof(instruction)}, p.instructions.data());
}

std::string shape_repr(const plan::tensor_shape& s) {
    return "TensorShape(" + std::to_string(s.microbatch_size) + ", " + std::to_string(s.seqlen) + ", " +
           std::to_string(s.dec_seqlen) + ", " + std::to_string(s.hidden) + ")";
}

void bind_values(py::module_& m) {
    py::class_<plan::tensor_shape>(m, "TensorShape", "Activation shape [microbatch_size, seqlen (+ dec_seqlen), hidden]")
        .def(py::init([](std::uint32_t b, std::uint32_t s, std::uint32_t d, std::uint32_t h) {
                 return plan::tensor_shape{b, s, d, h};
             }),
             py::arg("microbatch_size"), py::arg("seqlen"), py::arg("dec_seqlen") = 0, py::arg("hidden") = 0)
        .def_readonly("microbatch_size", &plan::tensor_shape::microbatch_size)
        .def_readonly("seqlen", &plan::tensor_shape::seqlen)
        .def_readonly("dec_seqlen", &plan::tensor_shape::dec_seqlen)
        .def_readonly("hidden", &plan::tensor_shape::hidden)
        .def("as_tuple", [](const plan::tensor_shape& s) { return py::make_tuple(s.microbatch_size, s.seqlen, s.dec_seqlen, s.hidden); })
        .def(py::self == py::self)
        .def("__repr__", &shape_repr);

    py::class_<instruction>(m, "Instruction", "One instruction of a rank's program (plan/instruction.hpp)")
        .def_property_readonly("kind", [](const instruction& x) { return plan::kind_name(x.kind); })
        .def_property_readonly("kind_code", [](const instruction& x) { return static_cast<int>(x.kind); })
        .def_property_readonly("mode", [](const instruction& x) { return std::string(plan::mode_name(x)); })
        .def_property_readonly("mode_code", [](const instruction& x) { return static_cast<int>(x.mode); })
        .def_property_readonly("dtype", [](const instruction& x) { return std::string(plan::to_string(x.type)); })
        .def_readonly("microbatch", &instruction::microbatch)
        .def_readonly("mb", &instruction::microbatch, "another name of microbatch")
        .def_readonly("stage", &instruction::stage)
        .def_readonly("peer", &instruction::peer)
        .def_property_readonly("in_slot", [](const instruction& x) { return slot(x.in); })
        .def_property_readonly("out_slot", [](const instruction& x) { return slot(x.out); })
        .def_property_readonly("stash_slot", [](const instruction& x) { return slot(x.stash); })
        .def_property_readonly("work_slot", [](const instruction& x) { return slot(x.work); })
        .def_readonly("shape", &instruction::shape)
        .def_readonly("bytes", &instruction::bytes)
        .def_property_readonly("frequency_mhz", [](const instruction& x) {
            return x.kind == plan::instr_kind::set_frequency ? std::optional<std::uint64_t>(plan::frequency_mhz(x)) : std::nullopt;
        })
        .def(py::self == py::self)
        .def("__repr__", [](const instruction& x) { return "Instruction(" + plan::detail::describe(x) + ")"; });

    py::class_<plan::buffer>(m, "Buffer", "One buffer of a rank's arena")
        .def_readonly("offset_bytes", &plan::buffer::offset_bytes)
        .def_readonly("size_bytes", &plan::buffer::size_bytes)
        .def_property_readonly("role", [](const plan::buffer& b) { return std::string(plan::to_string(b.role)); })
        .def_readonly("microbatch", &plan::buffer::microbatch)
        .def_readonly("mb", &plan::buffer::microbatch, "another name of microbatch")
        .def_readonly("stage", &plan::buffer::stage)
        .def(py::self == py::self)
        .def("__repr__", [](const plan::buffer& b) {
            return "Buffer(" + std::string(plan::to_string(b.role)) + ", mb " + std::to_string(b.microbatch) + ", stage " +
                   std::to_string(b.stage) + ", offset " + std::to_string(b.offset_bytes) + ", size " +
                   std::to_string(b.size_bytes) + ")";
        });

    py::class_<microbatch_view>(m, "MicroBatch", "One micro-batch: its replica, samples, padded shape and packed rows")
        .def_property_readonly("replica", [](const microbatch_view& v) { return v.entry.replica; })
        .def_property_readonly("sample_ids", [](const microbatch_view& v) { return v.entry.sample_ids; })
        .def_property_readonly("shape", [](const microbatch_view& v) { return v.entry.shape; })
        .def_readonly("rows", &microbatch_view::rows,
                      "Packed rows (sample ids per row) where the split packs; [] when every sample has its own row "
                      "(always [] for a micro-batch read from a plan file)")
        .def("__repr__", [](const microbatch_view& v) {
            return "MicroBatch(replica " + std::to_string(v.entry.replica) + ", " + std::to_string(v.entry.sample_ids.size()) +
                   " samples, " + shape_repr(v.entry.shape) + (v.rows.empty() ? "" : ", packed") + ")";
        });

    py::class_<plan::violation>(m, "Violation", "One broken rule of a plan")
        .def_readonly("rank", &plan::violation::rank)
        .def_property_readonly("index", [](const plan::violation& v) {
            return v.index == plan::violation::whole_program ? std::nullopt : std::optional<std::uint32_t>(v.index);
        })
        .def_readonly("rule", &plan::violation::rule)
        .def_readonly("message", &plan::violation::message)
        .def("__str__", &plan::violation::to_string);

    py::class_<plan::validation_report>(m, "ValidationReport", "What validate() found")
        .def_property_readonly("ok", &plan::validation_report::ok)
        .def_readonly("violations", &plan::validation_report::violations)
        .def_readonly("truncated", &plan::validation_report::truncated)
        .def("__bool__", &plan::validation_report::ok)
        .def("__repr__", [](const plan::validation_report& r) {
            return r.ok() ? std::string("ValidationReport(ok)")
                          : "ValidationReport(" + std::to_string(r.violations.size()) + (r.truncated ? "+" : "") + " violations)";
        })
        .def("__str__", &plan::validation_report::to_string);
}

void bind_header(py::module_& m) {
    using plan::plan_header;
    py::class_<plan_header>(m, "PlanHeader", "What every rank's file repeats: the iteration's identity and predictions")
        .def_readonly("version", &plan_header::version)
        .def_readonly("iteration", &plan_header::iteration)
        .def_readonly("devices", &plan_header::devices)
        .def_readonly("dp", &plan_header::dp)
        .def_readonly("chunks", &plan_header::chunks)
        .def_readonly("placement", &plan_header::placement)
        .def_readonly("stage_devices", &plan_header::stage_devices)
        .def_property_readonly("send_rule", [](const plan_header& h) { return std::string(name_of(h.sends)); })
        .def_readonly("schedule", &plan_header::schedule)
        .def_property_readonly("dtype", [](const plan_header& h) { return std::string(plan::to_string(h.type)); })
        .def_property_readonly("zero_stage", [](const plan_header& h) { return static_cast<int>(h.zero_stage); })
        .def_readonly("predicted_makespan_ms", &plan_header::predicted_makespan_ms)
        .def_readonly("predicted_peak_memory_mb", &plan_header::predicted_peak_memory_mb)
        .def_readonly("device_memory_mb", &plan_header::device_memory_mb)
        .def_readonly("model_state_mb", &plan_header::model_state_mb)
        .def_property_readonly("microbatches", &microbatch_views)
        .def_property_readonly("ranks", &plan_header::ranks)
        .def_property_readonly("virtual_stages", &plan_header::virtual_stages)
        .def("device_of_stage", [](const plan_header& h, std::uint32_t stage) {
            if (stage >= h.virtual_stages())
                throw py::index_error("stage " + std::to_string(stage) + " out of range (" + std::to_string(h.virtual_stages()) +
                                      " virtual stages)");
            return h.device_of_stage(stage);
        }, py::arg("stage"))
        .def("device_of_rank", &plan_header::device_of_rank, py::arg("rank"))
        .def("replica_of_rank", &plan_header::replica_of_rank, py::arg("rank"))
        .def(py::self == py::self)
        .def("__repr__", [](const plan_header& h) {
            return "PlanHeader(iteration " + std::to_string(h.iteration) + ", schedule " + h.schedule + ", " +
                   std::to_string(h.devices) + " devices x " + std::to_string(h.dp) + " replicas, " +
                   std::to_string(h.microbatches.size()) + " micro-batches)";
        });

    py::class_<plan::rank_program>(m, "RankProgram", "The program of one rank")
        .def_readonly("rank", &plan::rank_program::rank)
        .def_readonly("instructions", &plan::rank_program::instructions, "A new list of the instructions (copies)")
        .def("instructions_array", &instructions_array, "The instructions as a NumPy structured array (instruction_dtype())")
        .def_readonly("buffers", &plan::rank_program::buffers)
        .def_readonly("arena_bytes", &plan::rank_program::arena_bytes)
        .def_readonly("live_peak_bytes", &plan::rank_program::live_peak_bytes)
        .def("__len__", [](const plan::rank_program& p) { return p.instructions.size(); })
        .def(py::self == py::self);
}

void bind_plans(py::module_& m) {
    py::class_<rank_plan>(m, "RankPlan", "One rank's share of a plan: the header and its program")
        .def_readonly("header", &rank_plan::header)
        .def_readonly("program", &rank_plan::program)
        .def_property_readonly("rank", [](const rank_plan& p) { return p.program.rank; })
        .def("validate", [](const rank_plan& p, bool raise_error) { return checked(plan::validate_rank(p), raise_error); },
             py::arg("raise_error") = true,
             "Checks every rule that needs no other rank; raises ValueError listing the violations (raise_error=True) or "
             "returns the report")
        .def("to_bytes", &plan_bytes<rank_plan>, py::arg("format") = "binary")
        .def("to_json", [](const rank_plan& p) { return plan::to_json_text(p); })
        .def("write", &write_plan_file<rank_plan>, py::arg("path"), py::arg("format") = "binary")
        .def_static("from_bytes", [](std::string_view b) { return plan::rank_plan_from_bytes(b); }, py::arg("data"))
        .def(py::self == py::self);

    py::class_<execution_plan>(m, "ExecutionPlan", "All ranks' programs of one iteration")
        .def_readonly("header", &execution_plan::header)
        .def_readonly("programs", &execution_plan::programs)
        .def("share_of", [](const execution_plan& p, std::size_t r) {
            if (r >= p.programs.size())
                throw py::index_error("rank " + std::to_string(r) + " out of range (" + std::to_string(p.programs.size()) + " ranks)");
            return plan::share_of(p, r);
        }, py::arg("rank"))
        .def("validate", [](const execution_plan& p, bool raise_error) { return checked(plan::validate(p), raise_error); },
             py::arg("raise_error") = true,
             "Checks every rule (per rank, message matching, deadlock freedom); raises ValueError listing the violations "
             "(raise_error=True) or returns the report")
        .def("to_torch_csv", &plan::to_torch_csv, py::arg("with_comms") = false, py::arg("replica") = 0,
             "torch.distributed.pipelining's schedule CSV of one replica (docs/formats.md)")
        .def("to_bytes", &plan_bytes<execution_plan>, py::arg("format") = "binary")
        .def("to_json", [](const execution_plan& p) { return plan::to_json_text(p); })
        .def("write", &write_plan_file<execution_plan>, py::arg("path"), py::arg("format") = "binary")
        .def_static("from_bytes", [](std::string_view b) { return plan::execution_plan_from_bytes(b); }, py::arg("data"))
        .def(py::self == py::self);

    m.def("read_plan", [](const std::filesystem::path& path) {
        return plan::execution_plan_from_bytes(plan::read_file_bytes(path), path.string());
    }, py::arg("path"), "Reads a plan file (binary or JSON, any number of programs)");
    m.def("read_rank_plan", [](const std::filesystem::path& path) {
        return plan::rank_plan_from_bytes(plan::read_file_bytes(path), path.string());
    }, py::arg("path"), "Reads a rank file (binary or JSON, one program)");
    m.def("write_plan", &write_plan_file<execution_plan>, py::arg("plan"), py::arg("path"), py::arg("format") = "binary");
    m.def("write_plan", &write_plan_file<rank_plan>, py::arg("plan"), py::arg("path"), py::arg("format") = "binary");
    m.def("plan_from_bytes", [](std::string_view b) { return plan::execution_plan_from_bytes(b); }, py::arg("data"),
          "An ExecutionPlan from to_bytes() output (either format)");
    m.def("rank_plan_from_bytes", [](std::string_view b) { return plan::rank_plan_from_bytes(b); }, py::arg("data"),
          "A RankPlan from to_bytes() output (either format)");
}

void bind_names(py::module_& m) {
    m.attr("NO_SLOT") = plan::no_slot;
    m.attr("NO_PEER") = plan::no_peer;
    m.def("kind_name", [](int code) {
        if (code < 0 || code > 255) throw invalid_argument("kind code " + std::to_string(code) + " out of range [0, 255]");
        return plan::kind_name(static_cast<plan::instr_kind>(code));
    }, py::arg("code"), "The name of a kind code (user kinds: 'user<N>')");
    m.def("kind_code", [](std::string_view name) {
        const auto k = plan::parse_kind(name);
        if (!k) throw invalid_argument("unknown instruction kind '" + std::string(name) + "' (built-in names or user<128..255>)");
        return static_cast<int>(*k);
    }, py::arg("name"));
    m.def("kinds", [] {
        py::dict d;
        for (const auto& k : plan::builtin_kinds) d[py::str(std::string(k.name))] = static_cast<int>(k.kind);
        return d;
    }, "The built-in kinds: name -> code (codes 128..255 are users')");
    m.def("dtype_bytes", [](std::string_view name) {
        const auto t = plan::parse_dtype(name);
        if (!t) throw invalid_argument("unknown dtype '" + std::string(name) + "' (valid: " + plan::dtype_choices() + ")");
        return plan::dtype_bytes(*t);
    }, py::arg("dtype"));
    m.def("instruction_dtype", &instruction_dtype, "The NumPy dtype of RankProgram.instructions_array()");
}

}  // namespace

void bind_plan_objects(py::module_& m) {
    bind_values(m);
    bind_header(m);
    bind_plans(m);
    bind_names(m);
}

}  // namespace pipeplan::python
