// The cost models: pipeplan.AnalyticModel (a transformer shape on a hardware, the roofline model
// of cost/analytic.hpp) and pipeplan.ProfileModel (measured profiles, cost/profile.hpp).
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "binding.hpp"
#include "cost_models.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan::python {
namespace {

/// A shape from keyword fields alone: layers, hidden, heads and vocab are required; kv_heads =
/// heads, head_dim = hidden / heads, ffn_hidden = 4 · hidden, no decoder, no learned positions,
/// GeLU, LayerNorm, biases, dropout and tied embeddings unless given.
[[nodiscard]] transformer_shape scratch_shape(const py::dict& f) {
    for (const char* k : {"layers", "hidden", "heads", "vocab"})
        if (!f.contains(k)) throw invalid_argument(std::string("AnalyticModel: without a preset, '") + k + "' is required "
                                                   "(layers, hidden, heads and vocab)");
    transformer_shape s;
    s.hidden = f["hidden"].cast<int>();
    s.heads = f["heads"].cast<int>();
    if (s.heads < 1 || s.hidden % s.heads != 0)
        throw invalid_argument("AnalyticModel: hidden " + std::to_string(s.hidden) + " is not a multiple of heads " +
                               std::to_string(s.heads) + " (give head_dim)");
    s.kv_heads = s.heads;
    s.head_dim = s.hidden / s.heads;
    s.ffn_hidden = 4 * s.hidden;
    return s;
}

using shape_setter = std::function<void(transformer_shape&, py::handle)>;

/// The shape fields AnalyticModel accepts as keywords, each with how it is set.
[[nodiscard]] const std::vector<std::pair<std::string, shape_setter>>& shape_fields() {
    static const std::vector<std::pair<std::string, shape_setter>> fields = {
        {"layers", [](transformer_shape& s, py::handle v) { s.layers = v.cast<int>(); }},
        {"decoder_layers", [](transformer_shape& s, py::handle v) { s.decoder_layers = v.cast<int>(); }},
        {"hidden", [](transformer_shape& s, py::handle v) { s.hidden = v.cast<int>(); }},
        {"heads", [](transformer_shape& s, py::handle v) { s.heads = v.cast<int>(); }},
        {"kv_heads", [](transformer_shape& s, py::handle v) { s.kv_heads = v.cast<int>(); }},
        {"head_dim", [](transformer_shape& s, py::handle v) { s.head_dim = v.cast<int>(); }},
        {"ffn_hidden", [](transformer_shape& s, py::handle v) { s.ffn_hidden = v.cast<int>(); }},
        {"vocab", [](transformer_shape& s, py::handle v) { s.vocab = v.cast<int>(); }},
        {"max_positions", [](transformer_shape& s, py::handle v) { s.max_positions = v.cast<int>(); }},
        {"activation", [](transformer_shape& s, py::handle v) { s.activation = parse_name<ffn_activation>(v.cast<std::string>()); }},
        {"norm", [](transformer_shape& s, py::handle v) { s.norm = parse_name<norm_kind>(v.cast<std::string>()); }},
        {"linear_bias", [](transformer_shape& s, py::handle v) { s.linear_bias = v.cast<bool>(); }},
        {"dropout", [](transformer_shape& s, py::handle v) { s.dropout = v.cast<bool>(); }},
        {"tied_embeddings", [](transformer_shape& s, py::handle v) { s.tied_embeddings = v.cast<bool>(); }},
    };
    return fields;
}

/// The time factors given as keywords (the same for every component and phase).
[[nodiscard]] analytic_factors factors_of(py::dict& kw) {
    time_factors t;
    const auto take = [&](const char* k, double& field) {
        if (kw.contains(k)) field = py::cast<double>(kw.attr("pop")(k));
    };
    take("compute_efficiency", t.compute_efficiency);
    take("memory_efficiency", t.memory_efficiency);
    take("link_efficiency", t.link_efficiency);
    take("overhead_ms_per_kernel", t.overhead_ms_per_kernel);
    return analytic_factors::uniform(t);
}

/// A hardware preset by name, or a dict of hardware_traits' fields (name optional).
[[nodiscard]] hardware_traits hardware_of(py::handle hw, std::string& name) {
    if (py::isinstance<py::str>(hw)) {
        hardware_traits h = find_hardware(hw.cast<std::string>());
        name = std::string(h.name);
        return h;
    }
    const py::dict d = hw.cast<py::dict>();
    hardware_traits h;
    const auto need = [&](const char* k) {
        if (!d.contains(k)) throw invalid_argument(std::string("AnalyticModel: hardware dict lacks '") + k + "'");
        return d[k].cast<double>();
    };
    name = d.contains("name") ? d["name"].cast<std::string>() : "custom";
    h.peak_tensor_flops = need("peak_tensor_flops");
    h.memory_bandwidth_bytes_per_s = need("memory_bandwidth_bytes_per_s");
    h.link_bandwidth_bytes_per_s = need("link_bandwidth_bytes_per_s");
    h.device_memory_mb = d.contains("device_memory_mb") ? d["device_memory_mb"].cast<double>() : 0.0;
    return h;
}

[[nodiscard]] std::shared_ptr<analytic_model_py> make_analytic(const std::optional<std::string>& preset, py::handle hw,
                                                               const py::kwargs& kwargs) {
    py::dict kw = kwargs.attr("copy")();  // the factors and the name are popped off
    const analytic_factors factors = factors_of(kw);
    std::string name = kw.contains("name") ? py::cast<std::string>(kw.attr("pop")("name")) : std::string();
    const bool from_preset = preset.has_value() || kw.empty();
    transformer_shape s = from_preset ? find_transformer_shape(preset.value_or("gpt-6.7b")) : scratch_shape(kw);
    for (const auto& [k, v] : kw) {
        const std::string key = py::cast<std::string>(k);
        const auto& fs = shape_fields();
        const auto it = std::find_if(fs.begin(), fs.end(), [&](const auto& f) { return f.first == key; });
        if (it == fs.end()) {
            std::string valid;
            for (const auto& f : fs) valid += f.first + ", ";
            throw invalid_argument("AnalyticModel: unknown field '" + key + "' (valid: " + valid +
                                   "compute_efficiency, memory_efficiency, link_efficiency, overhead_ms_per_kernel, name)");
        }
        it->second(s, v);
    }
    if (!from_preset || kw.contains("decoder_layers")) s.encoder_decoder = s.decoder_layers > 0;
    auto out = std::make_shared<analytic_model_py>();
    out->shape_name = name.empty() ? std::string(from_preset ? s.name : "custom") : name;
    const hardware_traits h = hardware_of(hw, out->hardware_name);
    s.name = out->shape_name;
    hardware_traits hv = h;
    hv.name = out->hardware_name;
    out->model.emplace(s, hv, factors);
    return out;
}

/// evaluate()'s result: each metric, or None where the model has no figure.
template <class Model>
[[nodiscard]] py::dict evaluate(const Model& m, const std::string& comp, int mbs, int seqlen, int dec_seqlen, int tp,
                                const std::string& recompute) {
    layer_query q;
    q.comp = parse_name<component>(comp);
    q.mbs = mbs;
    q.seqlen_tokens = seqlen;
    q.dec_seqlen_tokens = dec_seqlen;
    q.tp = tp;
    q.recompute = parse_name<recompute_mode>(recompute);
    const layer_cost c = m.evaluate(q);
    const auto value = [](const estimate<double>& e) { return e ? py::object(py::float_(e.value())) : py::object(py::none()); };
    py::dict d;
    d["forward_ms"] = value(c.forward_ms);
    d["backward_ms"] = value(c.backward_ms);
    d["stored_mb"] = value(c.stored_mb);
    d["peak_mb"] = value(c.peak_mb);
    return d;
}

[[nodiscard]] py::dict shape_dict(const transformer_shape& s) {
    py::dict d;
    d["name"] = std::string(s.name);
    d["layers"] = s.layers;
    d["decoder_layers"] = s.decoder_layers;
    d["hidden"] = s.hidden;
    d["heads"] = s.heads;
    d["kv_heads"] = s.kv_heads;
    d["head_dim"] = s.head_dim;
    d["ffn_hidden"] = s.ffn_hidden;
    d["vocab"] = s.vocab;
    d["max_positions"] = s.max_positions;
    d["activation"] = std::string(name_of(s.activation));
    d["norm"] = std::string(name_of(s.norm));
    d["linear_bias"] = s.linear_bias;
    d["dropout"] = s.dropout;
    d["tied_embeddings"] = s.tied_embeddings;
    d["encoder_decoder"] = s.encoder_decoder;
    return d;
}

constexpr const char* analytic_doc =
    "The analytic (roofline) cost model of a transformer on an accelerator.\n\n"
    "AnalyticModel(preset='gpt-6.7b') prices a built-in preset (model_presets()); keyword shape fields replace the "
    "preset's. Without a preset the shape comes from the keywords alone (layers, hidden, heads and vocab required; "
    "kv_heads = heads, head_dim = hidden / heads, ffn_hidden = 4 * hidden; decoder_layers > 0 makes it "
    "encoder-decoder). hardware: a preset name (hardware_presets()) or a dict with peak_tensor_flops, "
    "memory_bandwidth_bytes_per_s, link_bandwidth_bytes_per_s. compute_efficiency, memory_efficiency, "
    "link_efficiency and overhead_ms_per_kernel set the time factors of every component and phase.";

}  // namespace

void bind_cost_models(py::module_& m) {
    py::class_<analytic_model_py, std::shared_ptr<analytic_model_py>>(m, "AnalyticModel", analytic_doc)
        .def(py::init(&make_analytic), py::arg("preset") = py::none(), py::arg("hardware") = "a100-40gb")
        .def_property_readonly("name", [](const analytic_model_py& a) { return a.shape_name; })
        .def_property_readonly("hardware", [](const analytic_model_py& a) { return a.hardware_name; })
        .def_property_readonly("shape", [](const analytic_model_py& a) { return shape_dict(a.model->shape()); })
        .def_property_readonly("hidden", [](const analytic_model_py& a) { return a.model->shape().hidden; })
        .def_property_readonly("is_encoder_decoder", [](const analytic_model_py& a) { return a.model->is_encoder_decoder(); })
        .def("evaluate", [](const analytic_model_py& a, const std::string& c, int mbs, int seqlen, int dec, int tp,
                            const std::string& r) { return evaluate(*a.model, c, mbs, seqlen, dec, tp, r); },
             py::arg("component"), py::arg("mbs"), py::arg("seqlen"), py::arg("dec_seqlen") = 0, py::arg("tp") = 1,
             py::arg("recompute") = "none",
             "One layer's (or the embedding's / LM head's) forward_ms, backward_ms, stored_mb, peak_mb for one micro-batch")
        .def("__repr__", [](const analytic_model_py& a) { return "AnalyticModel('" + a.shape_name + "' on " + a.hardware_name + ")"; });

    py::class_<profile_model_py, std::shared_ptr<profile_model_py>>(
        m, "ProfileModel", "A cost model interpolated from measured profiles (<folder>/<model_name>_timing.csv, ...)")
        .def(py::init([](const std::string& folder, const std::string& name, const std::string& interpolation) {
                 return std::make_shared<profile_model_py>(
                     profile_model_py{profile_cost_model::load(folder, name, parse_name<interpolation_mode>(interpolation))});
             }),
             py::arg("folder"), py::arg("model_name"), py::arg("interpolation") = "recommended")
        .def_property_readonly("name", [](const profile_model_py& p) { return p.model.name(); })
        .def_property_readonly("tp_degrees", [](const profile_model_py& p) { return p.model.tp_degrees(); })
        .def_property_readonly("is_encoder_decoder", [](const profile_model_py& p) { return p.model.is_encoder_decoder(); })
        .def("evaluate", [](const profile_model_py& p, const std::string& c, int mbs, int seqlen, int dec, int tp,
                            const std::string& r) { return evaluate(p.model, c, mbs, seqlen, dec, tp, r); },
             py::arg("component"), py::arg("mbs"), py::arg("seqlen"), py::arg("dec_seqlen") = 0, py::arg("tp") = 1,
             py::arg("recompute") = "none")
        .def("__repr__", [](const profile_model_py& p) { return "ProfileModel('" + p.model.name() + "')"; });

    m.def("model_presets", [] {
        std::vector<std::string> v;
        for (const auto& p : transformer_presets) v.emplace_back(p.name);
        return v;
    });
    m.def("hardware_presets", [] {
        std::vector<std::string> v;
        for (const auto& h : hardware_presets) v.emplace_back(h.name);
        return v;
    });
}

}  // namespace pipeplan::python
