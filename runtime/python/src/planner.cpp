// pipeplan.Planner: plan/planner.hpp's reusable planner over either cost model, with the
// `pipeplan plan` command's options as keywords (same names with underscores, same defaults),
// and its PlanResult. The planner releases the GIL while it plans; one Planner plans one batch
// at a time (a second thread waits for the first).
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include <pybind11/numpy.h>
#include <optional>
#include <algorithm>

#include "binding.hpp"
#include "cost_models.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/partition/transformer.hpp"
#include "pipeplan/plan/identity.hpp"
#include "pipeplan/plan/planner.hpp"

namespace pipeplan::python {
namespace {

/// The keyword options before they become planner_options (the model decides some of them).
struct planner_settings {
    plan::planner_options po;
    int stages = 0, layers_per_stage = 0, chunks = 1, max_seqlen = 0, hidden_size = 0;
    std::vector<int> layers;
    std::string schedule = "auto", accounting = "pipeplan", recompute = "auto";
};

using option_setter = std::function<void(planner_settings&, py::handle)>;

/// Every keyword Planner accepts, with how it is set (defaults: planner_settings' and
/// planner_options'; the CLI's flags of the same names have the same ones).
[[nodiscard]] const std::vector<std::pair<std::string, option_setter>>& planner_keywords() {
    using S = planner_settings;
    static const std::vector<std::pair<std::string, option_setter>> k = {
        {"stages", [](S& s, py::handle v) { s.stages = v.cast<int>(); }},
        {"layers_per_stage", [](S& s, py::handle v) { s.layers_per_stage = v.cast<int>(); }},
        {"layers", [](S& s, py::handle v) { s.layers = v.cast<std::vector<int>>(); }},
        {"memory_mb", [](S& s, py::handle v) { s.po.config.device_memory_mb = v.cast<double>(); }},
        {"dp", [](S& s, py::handle v) { s.po.config.dp = v.cast<int>(); }},
        {"tp", [](S& s, py::handle v) { s.po.config.tp = v.cast<int>(); }},
        {"chunks", [](S& s, py::handle v) { s.chunks = v.cast<int>(); }},
        {"zero_stage", [](S& s, py::handle v) { s.po.config.zero_stage = v.cast<int>(); }},
        {"schedule", [](S& s, py::handle v) { s.schedule = v.cast<std::string>(); }},
        {"max_pending_w", [](S& s, py::handle v) { s.po.max_pending_w = v.cast<std::size_t>(); }},
        {"overlap_factor", [](S& s, py::handle v) { s.po.overlap_factor = v.cast<double>(); }},
        {"max_seqlen", [](S& s, py::handle v) { s.max_seqlen = v.cast<int>(); }},
        {"accounting", [](S& s, py::handle v) { s.accounting = v.cast<std::string>(); }},
        {"bandwidth_gbps", [](S& s, py::handle v) { s.po.cluster.bandwidth_gbps = v.cast<double>(); }},
        {"latency_us", [](S& s, py::handle v) { s.po.cluster.latency_us = v.cast<double>(); }},
        {"devices_per_node", [](S& s, py::handle v) { s.po.cluster.devices_per_node = v.cast<std::uint32_t>(); }},
        {"intra_node_bandwidth_gbps", [](S& s, py::handle v) { s.po.cluster.intra_node_bandwidth_gbps = v.cast<double>(); }},
        {"hidden_size", [](S& s, py::handle v) { s.hidden_size = v.cast<int>(); }},
        {"threads", [](S& s, py::handle v) { s.po.threads = v.cast<std::size_t>(); }},
        {"alternative_splits", [](S& s, py::handle v) { s.po.alternative_splits = v.cast<std::size_t>(); }},
        {"bound_tolerance", [](S& s, py::handle v) { s.po.bound_tolerance = v.cast<double>(); }},
        {"memory_probes", [](S& s, py::handle v) {
             s.po.memory_probe_shares = v.cast<bool>() ? plan::planner_options::recommended_memory_probe_shares() : std::vector<double>{};
         }},
        {"dtype", [](S& s, py::handle v) {
             const std::string t = v.cast<std::string>();
             const auto d = plan::parse_dtype(t);
             if (!d) throw invalid_argument("Planner: unknown dtype '" + t + "' (valid: " + plan::dtype_choices() + ")");
             s.po.type = *d;
         }},
        {"recompute", [](S& s, py::handle v) { s.recompute = v.cast<std::string>(); }},
        {"packing", [](S& s, py::handle v) { s.po.split.packing.enabled = v.cast<bool>(); }},
        {"separator_tokens", [](S& s, py::handle v) { s.po.split.packing.separator_tokens = v.cast<int>(); }},
        {"round_to_tokens", [](S& s, py::handle v) { s.po.split.lengths.round_to_tokens = v.cast<int>(); }},
        {"seed", [](S& s, py::handle v) { s.po.seed = v.cast<std::uint64_t>(); }},
        {"order_search_evaluations", [](S& s, py::handle v) { s.po.order_search_evaluations = v.cast<std::size_t>(); }},
        {"polish_evaluations", [](S& s, py::handle v) { s.po.polish_evaluations = v.cast<std::size_t>(); }},
        {"compare_splits", [](S& s, py::handle v) { s.po.compare_splits = v.cast<bool>(); }},
    };
    return k;
}

[[nodiscard]] planner_settings settings_of(const py::kwargs& kw) {
    planner_settings s;
    const auto& table = planner_keywords();
    for (const auto& [key, value] : kw) {
        const std::string name = py::cast<std::string>(key);
        const auto it = std::find_if(table.begin(), table.end(), [&](const auto& e) { return e.first == name; });
        if (it == table.end()) {
            std::string valid;
            for (const auto& e : table) valid += (valid.empty() ? "" : ", ") + e.first;
            throw invalid_argument("Planner: unknown option '" + name + "' (valid: " + valid + ")");
        }
        try {
            it->second(s, value);
        } catch (const py::cast_error&) {
            throw invalid_argument("Planner: option '" + name + "' has the wrong type (" +
                                   py::cast<std::string>(py::str(py::type::of(value))) + ")");
        }
    }
    if (!kw.contains("memory_mb")) throw invalid_argument("Planner: memory_mb (the device memory in MB) is required");
    return s;
}

/// recompute: "auto" tries none, selective, full (the library's ladder); a mode name uses only it.
[[nodiscard]] std::vector<recompute_mode> recompute_ladder(const std::string& r) {
    if (r == "auto") return batching::default_recompute_ladder();
    return {parse_name<recompute_mode>(r)};
}

/// The pipeline's shape: stages with layers_per_stage, or layers (one count per chunk).
void pipeline_shape(planner_settings& s, bool encoder_decoder) {
    auto& cfg = s.po.config;
    cfg.virtual_chunks = s.chunks;
    if (s.layers.empty()) {
        if (s.stages < 1 || s.layers_per_stage < 1)
            throw invalid_argument("Planner: give stages and layers_per_stage (>= 1), or layers=[L0, L1, ...]");
        cfg.stages = s.stages;
        cfg.layers_per_stage = s.layers_per_stage;
        return;
    }
    if (s.layers_per_stage > 0) throw invalid_argument("Planner: layers replaces layers_per_stage: give one or the other");
    if (s.po.split.accounting != batching::accounting_mode::pipeplan)
        throw invalid_argument("Planner: layers needs accounting='pipeplan' (dynapipe's accounting assumes uniform stages)");
    if (s.chunks < 1 || s.layers.size() % static_cast<std::size_t>(s.chunks) != 0)
        throw invalid_argument("Planner: layers lists " + std::to_string(s.layers.size()) +
                               " chunks, not a multiple of chunks " + std::to_string(s.chunks));
    cfg.stages = static_cast<int>(s.layers.size()) / s.chunks;
    if (s.stages > 0 && s.stages != cfg.stages)
        throw invalid_argument("Planner: layers lists " + std::to_string(s.layers.size()) + " chunks, but stages " +
                               std::to_string(s.stages) + " x chunks " + std::to_string(s.chunks));
    cfg.layers_per_stage = *std::max_element(s.layers.begin(), s.layers.end());
    cfg.chunks = batching::layout_from_layer_counts(s.layers, encoder_decoder);
}

/// The model's hidden size: the analytic shape's, or the preset named like the profile
/// (gpt_6.7b -> gpt-6.7b); 0 when unknown.
[[nodiscard]] int model_hidden(const analytic_model_py& m) { return m.model->shape().hidden; }
[[nodiscard]] int model_hidden(const profile_model_py& m) {
    std::string preset = m.model.name();
    std::replace(preset.begin(), preset.end(), '_', '-');
    for (const auto& p : transformer_presets)
        if (p.name == preset) return p.hidden;
    return 0;
}
[[nodiscard]] std::string model_name(const analytic_model_py& m) { return m.shape_name; }
[[nodiscard]] std::string model_name(const profile_model_py& m) { return m.model.name(); }

/// The planner options of the keywords for a model (`hidden`: the model's hidden size, 0 = unknown).
[[nodiscard]] plan::planner_options options_for(planner_settings s, int hidden, bool encoder_decoder, const std::string& name) {
    s.po.split.accounting = batching::parse_accounting_mode(s.accounting);
    pipeline_shape(s, encoder_decoder);
    if (s.schedule != "auto") {
        const schedule::schedule_traits& row = schedule::schedules().at(s.schedule);
        if (!schedule::accepts_chunks(row, static_cast<std::size_t>(std::max(s.chunks, 1))))
            throw invalid_argument("Planner: chunks " + std::to_string(s.chunks) + " does not apply to schedule " + s.schedule +
                                   " (auto, adaptive and interleaved run several chunks per device; zb-v, v-half and v-min two)");
        s.po.schedule = schedule::schedule_id(row.name);
    }
    s.po.split.lengths.max_seqlen_tokens = s.max_seqlen;
    s.po.split.lengths.max_dec_seqlen_tokens = s.max_seqlen;
    s.po.split.recompute_ladder = recompute_ladder(s.recompute);
    s.po.hidden_size = s.hidden_size > 0 ? s.hidden_size : hidden;
    if (s.po.hidden_size <= 0)
        throw invalid_argument("Planner: the hidden size of model '" + name + "' is unknown: pass hidden_size=N");
    return s.po;
}

/// A batch from a list or array of lengths (shape (N,)) or of (input, target) pairs (N, 2).
[[nodiscard]] std::vector<batching::sample> batch_of(py::handle lengths, bool encoder_decoder) {
    const py::array a = py::module_::import("numpy").attr("asarray")(lengths);
    if (a.size() == 0) return {};
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u')
        throw invalid_argument("lengths: expected integer token counts, got NumPy dtype " + py::cast<std::string>(py::str(a.dtype())));
    const bool pairs = a.ndim() == 2 && a.shape(1) == 2;
    if (a.ndim() != 1 && !pairs)
        throw invalid_argument("lengths: expected a list of lengths (shape (N,)) or of (input, target) pairs (shape (N, 2)), "
                               "got " + std::to_string(a.ndim()) + " dimensions");
    if (!pairs && encoder_decoder)
        throw invalid_argument("lengths: an encoder-decoder model needs (input, target) pairs (shape (N, 2))");
    const auto v = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(a);
    const long long* x = v.data();
    std::vector<batching::sample> batch(static_cast<std::size_t>(a.shape(0)));
    for (std::size_t i = 0; i < batch.size() * (pairs ? 2 : 1); ++i)
        if (x[i] < 0 || x[i] > batching::max_supported_tokens)
            throw invalid_argument("lengths[" + std::to_string(pairs ? i / 2 : i) + "]: " + std::to_string(x[i]) +
                                   " tokens is out of range [0, 2^30]");
    for (std::size_t i = 0; i < batch.size(); ++i)
        batch[i] = pairs ? batching::sample{static_cast<int>(x[2 * i]), static_cast<int>(x[2 * i + 1])}
                         : batching::sample{static_cast<int>(x[i]), 0};
    return batch;
}

/// What Planner.plan() returns: the C++ result and the micro-batches with their packed rows.
struct plan_result_py {
    plan::plan_result r;
    std::vector<microbatch_view> microbatches;
};

/// The plan's micro-batch table with each micro-batch's packed rows from the split.
[[nodiscard]] std::vector<microbatch_view> with_rows(const plan::plan_result& r) {
    std::unordered_map<std::uint32_t, std::size_t> by_first;  // a sample is in one micro-batch
    for (std::size_t k = 0; k < r.split.microbatches.size(); ++k)
        if (!r.split.microbatches[k].empty()) by_first[static_cast<std::uint32_t>(r.split.microbatches[k].front())] = k;
    std::vector<microbatch_view> out = microbatch_views(r.plan.header);
    for (auto& v : out) {
        if (v.entry.sample_ids.empty()) continue;
        const auto it = by_first.find(v.entry.sample_ids.front());
        if (it != by_first.end()) v.rows = r.split.per_microbatch[it->second].rows;
    }
    return out;
}

/// The Python Planner: the model it holds (kept alive) and the library's planner over it.
class planner_py {
public:
    planner_py(py::object model, const py::kwargs& kw) : model_(std::move(model)) {
        const planner_settings s = settings_of(kw);
        if (py::isinstance<analytic_model_py>(model_)) {
            const auto& m = model_.cast<const analytic_model_py&>();
            impl_ = std::make_unique<plan::planner<analytic_cost_model>>(
                *m.model, options_for(s, model_hidden(m), m.model->is_encoder_decoder(), model_name(m)));
            encoder_decoder_ = m.model->is_encoder_decoder();
        } else if (py::isinstance<profile_model_py>(model_)) {
            const auto& m = model_.cast<const profile_model_py&>();
            impl_ = std::make_unique<plan::planner<profile_cost_model>>(
                m.model, options_for(s, model_hidden(m), m.model.is_encoder_decoder(), model_name(m)));
            encoder_decoder_ = m.model.is_encoder_decoder();
        } else {
            throw py::type_error("Planner: the cost model must be a pipeplan.AnalyticModel or pipeplan.ProfileModel");
        }
    }

    /// Plans `lengths` (without the GIL); `given`: plan these micro-batches instead of splitting.
    [[nodiscard]] plan_result_py plan(py::handle lengths, std::uint64_t iteration,
                                      std::optional<std::vector<std::vector<int>>> given) {
        const std::vector<batching::sample> batch = batch_of(lengths, encoder_decoder_);
        plan_result_py out;
        {
            py::gil_scoped_release nogil;
            const std::lock_guard<std::mutex> lock(mu_);
            out.r = std::visit([&](auto& p) { return given ? p->plan_microbatches(batch, std::move(*given)) : p->plan(batch); },
                               impl_);
        }
        // The iteration is only recorded in the header (the planner's choices do not depend on it).
        out.r.plan.header.iteration = iteration;
        // The plan identity every rank file carries (as `pipeplan plan --out` writes them).
        plan::stamp_identity(out.r.plan);
        out.microbatches = with_rows(out.r);
        return out;
    }

    [[nodiscard]] const py::object& model() const noexcept { return model_; }
    [[nodiscard]] const plan::planner_options& options() const {
        return std::visit([](const auto& p) -> const plan::planner_options& { return p->options(); }, impl_);
    }

private:
    py::object model_;
    std::variant<std::unique_ptr<plan::planner<analytic_cost_model>>, std::unique_ptr<plan::planner<profile_cost_model>>> impl_;
    bool encoder_decoder_ = false;
    std::mutex mu_;
};

[[nodiscard]] py::dict planning_ms(const plan::planning_times& t) {
    py::dict d;
    d["split"] = t.split_ms;
    d["schedule"] = t.schedule_ms;
    d["lower"] = t.lower_ms;
    d["validate"] = t.validate_ms;
    d["total"] = t.total_ms;
    return d;
}

void bind_result(py::module_& m) {
    py::class_<plan::candidate_report>(m, "Candidate", "One schedule the planner tried on one split")
        .def_readonly("schedule", &plan::candidate_report::name)
        .def_readonly("split", &plan::candidate_report::split)
        .def_readonly("makespan_ms", &plan::candidate_report::makespan_ms)
        .def_readonly("peak_memory_mb", &plan::candidate_report::peak_memory_mb)
        .def_readonly("feasible", &plan::candidate_report::feasible)
        .def_readonly("polished", &plan::candidate_report::polished)
        .def("__repr__", [](const plan::candidate_report& c) {
            return "Candidate(" + c.name + ", " + c.split + " split, " + std::to_string(c.makespan_ms) + " ms" +
                   (c.feasible ? "" : ", over the memory limit") + ")";
        });

    using R = plan_result_py;
    py::class_<R>(m, "PlanResult", "One planned iteration (Planner.plan)")
        .def_property_readonly("plan", [](const R& r) -> const plan::execution_plan& { return r.r.plan; })
        .def_property_readonly("programs", [](const R& r) -> const std::vector<plan::rank_program>& { return r.r.plan.programs; })
        .def_readonly("microbatches", &R::microbatches)
        .def_property_readonly("schedule", [](const R& r) { return r.r.plan.header.schedule; })
        .def_property_readonly("makespan_ms", [](const R& r) { return r.r.makespan_ms; })
        .def_property_readonly("lower_bound_ms", [](const R& r) { return r.r.lower_bound_ms; })
        .def_property_readonly("candidates", [](const R& r) -> const std::vector<plan::candidate_report>& { return r.r.candidates; })
        .def_property_readonly("peak_memory_mb", [](const R& r) { return r.r.peak_memory_mb; })
        .def_property_readonly("arena_mb", [](const R& r) { return r.r.arena_mb; })
        .def_property_readonly("live_peak_mb", [](const R& r) { return r.r.live_peak_mb; })
        .def_property_readonly("model_state_mb", [](const R& r) { return r.r.model_state_mb; })
        .def_property_readonly("budget_mb", [](const R& r) { return r.r.budget_mb; })
        .def_property_readonly("memory_attempts", [](const R& r) { return r.r.memory_attempts; })
        .def_property_readonly("memory_probes", [](const R& r) { return r.r.memory_probes; })
        .def_property_readonly("recompute", [](const R& r) { return std::string(name_of(r.r.split.recompute)); })
        .def_property_readonly("planning_ms", [](const R& r) { return planning_ms(r.r.times); })
        .def("share_of", [](const R& r, std::size_t rank) {
            if (rank >= r.r.plan.programs.size())
                throw py::index_error("rank " + std::to_string(rank) + " out of range (" +
                                      std::to_string(r.r.plan.programs.size()) + " ranks)");
            return plan::share_of(r.r.plan, rank);
        }, py::arg("rank"))
        .def("__repr__", [](const R& r) {
            return "PlanResult(" + r.r.plan.header.schedule + ", " + std::to_string(r.microbatches.size()) + " micro-batches, " +
                   std::to_string(r.r.makespan_ms) + " ms)";
        });
}

constexpr const char* planner_doc =
    "Planner(model, **options): plans iterations with a cost model; reusable (keeps its caches).\n\n"
    "Options (the names and defaults of `pipeplan plan`'s flags): stages, layers_per_stage (or layers=[L0, ...]), "
    "memory_mb (required), dp=1, tp=1, chunks=1, zero_stage=0, schedule='auto', max_pending_w=0, overlap_factor=1, max_seqlen=0, accounting='pipeplan', "
    "bandwidth_gbps=100, latency_us=0, devices_per_node=1, intra_node_bandwidth_gbps=0, hidden_size (the model's), "
    "threads=1, alternative_splits=0, memory_probes=False, bound_tolerance=0; and the library's: dtype='fp16', recompute='auto' (or none, selective, full), "
    "packing=False, separator_tokens=0, round_to_tokens=8, seed=1, order_search_evaluations=24, "
    "polish_evaluations=96, compare_splits=True.";

}  // namespace

void bind_planner(py::module_& m) {
    bind_result(m);
    m.def("equal_layer_counts", &partition::equal_layer_counts, py::arg("layers"), py::arg("stages"),
          "pipeplan's equal layer sharding (the partition tier's method 'layers'): ``layers`` over ``stages`` in equal "
          "counts, the remainder one each to the first stages; ValueError unless 1 <= stages <= layers.");
    py::class_<planner_py>(m, "Planner", planner_doc)
        .def(py::init<py::object, const py::kwargs&>(), py::arg("model"))
        .def("plan", [](planner_py& p, py::handle lengths, std::uint64_t iteration) { return p.plan(lengths, iteration, std::nullopt); },
             py::arg("lengths"), py::arg("iteration") = 0,
             "Plans one iteration of `lengths` (list or NumPy array of sequence lengths, or (input, target) pairs); the "
             "GIL is released while it plans")
        .def("plan_microbatches", [](planner_py& p, py::handle lengths, std::vector<std::vector<int>> mbs, std::uint64_t it) {
                 return p.plan(lengths, it, std::move(mbs));
             },
             py::arg("lengths"), py::arg("microbatches"), py::arg("iteration") = 0,
             "Plans the given micro-batches (lists of sample indices) of `lengths` instead of splitting it")
        .def_property_readonly("model", &planner_py::model)
        .def_property_readonly("dtype", [](const planner_py& p) { return std::string(plan::to_string(p.options().type)); })
        .def_property_readonly("stages", [](const planner_py& p) { return p.options().config.stages; })
        .def_property_readonly("dp", [](const planner_py& p) { return p.options().config.dp; })
        .def_property_readonly("chunks", [](const planner_py& p) { return p.options().config.virtual_chunks; })
        .def_property_readonly("hidden_size", [](const planner_py& p) { return p.options().hidden_size; })
        .def_static("option_names", [] {
            std::vector<std::string> v;
            for (const auto& e : planner_keywords()) v.push_back(e.first);
            return v;
        });
}

}  // namespace pipeplan::python
