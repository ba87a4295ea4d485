// pipeplan/schedule/scenario_json.hpp — scenario JSON in and simulation results out, through
// nlohmann-json. Only this header (and the CLI) needs nlohmann; the core schedule headers do not.
//
// Scenario file (docs/formats.md):
//   {"stages": S,
//    "microbatches": [{"forward_ms": [S], "backward_ms": [S], "stored_mb": [S], "peak_mb": [S]}, ...],
//    "model_state_mb": [S],
//    "network": {"latency_ms": x, "bandwidth_gbps": y, "activation_mb": [M],        (optional)
//                "intra_node_latency_ms": x, "intra_node_bandwidth_gbps": y,       (optional)
//                "devices_per_node": n},                                           (optional)
//    "devices": D, "placement": [S device indices],                                  (optional)
//    "checkpoint_ratio": [S ratios in [0, 1]]}                                       (optional)
// Errors throw pipeplan::input_error(file, line, column, field path, reason), e.g.
//   "s.json:7:18: column 'microbatches[3].forward_ms[2]': expected a number in [0, 1e+09] ms, found -1".
// Every number has a range (scenario_limits in scenario.hpp; validate() checks the same): times
// and latencies [0, 1e9] ms, memory and message sizes [0, 1e9] MB, bandwidths [0, 1e6] Gbit/s,
// ratios [0, 1]. Locations come from core/json_document.hpp (one linear pass, nesting at most
// 64 deep).
// ADL customization: `nlohmann::json j = sc;` and `j.get<scenario>()` work (errors then name
// the source "<json>").
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/core/json_document.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/scenario.hpp"
#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::schedule {

namespace detail {

/// Decodes the optional `devices`, `placement` and `checkpoint_ratio` fields into `sc` (whose
/// stages are known); `fail(value, path, reason)` must throw, `array(v, path, n, lo, hi, unit)`
/// reads n numbers in [lo, hi].
template <class Fail, class Array>
void read_layout_json(const nlohmann::json& j, scenario& sc, Fail& fail, Array& array) {
    const std::size_t S = sc.stages;
    if (const auto it = j.find("devices"); it != j.end()) {
        if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > static_cast<long long>(S))
            fail(*it, "devices", "expected an integer in [1, " + std::to_string(S) + "] (at most one device per stage), found " +
                                it->dump());
        sc.devices = static_cast<std::size_t>(it->get<long long>());
    }
    const std::size_t D = sc.device_count();
    if (const auto it = j.find("placement"); it != j.end()) {
        if (!it->is_array() || it->size() != S)
            fail(*it, "placement", "expected an array of " + std::to_string(S) + " device indices (one per stage), found " +
                                  it->dump());
        std::vector<char> used(D, 0);
        for (std::size_t v = 0; v < S; ++v) {
            const auto& x = (*it)[v];
            if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() >= static_cast<long long>(D))
                fail(x, "placement[" + std::to_string(v) + "]",
                     "expected a device index in [0, " + std::to_string(D - 1) + "], found " + x.dump());
            sc.placement.push_back(static_cast<std::uint32_t>(x.get<long long>()));
            used[sc.placement.back()] = 1;
        }
        for (std::size_t d = 0; d < D; ++d)
            if (!used[d]) fail(*it, "placement", "no stage runs on device " + std::to_string(d));
    } else if (D != S) {
        fail(j.contains("devices") ? j.at("devices") : j, "devices", std::to_string(D) + " devices for " + std::to_string(S) + " stages need a 'placement'");
    }
    if (const auto it = j.find("checkpoint_ratio"); it != j.end()) {
        sc.checkpoint_ratio = array(*it, "checkpoint_ratio", S, 0.0, 1.0, "(a ratio)");
    }
}

/// Reads the `network` object into `sc` (whose micro-batches are known).
template <class Fail, class Number, class Array>
void read_network_json(const nlohmann::json& nw, scenario& sc, Fail& fail, Number& number, Array& array) {
    using L = scenario_limits;
    if (!nw.is_object()) fail(nw, "network", "expected an object");
    auto opt = [&](const char* name, double& out, double hi, const char* unit) {
        if (const auto f = nw.find(name); f != nw.end()) out = number(*f, std::string("network.") + name, 0.0, hi, unit);
    };
    opt("latency_ms", sc.network.latency_ms, L::max_time_ms, "ms");
    opt("bandwidth_gbps", sc.network.bandwidth_gbps, L::max_bandwidth_gbps, "Gbit/s (0: messages are free)");
    opt("intra_node_latency_ms", sc.network.intra_node_latency_ms, L::max_time_ms, "ms");
    opt("intra_node_bandwidth_gbps", sc.network.intra_node_bandwidth_gbps, L::max_bandwidth_gbps,
        "Gbit/s (0: messages are free)");
    if (const auto f = nw.find("devices_per_node"); f != nw.end()) {
        if (!f->is_number_integer() || f->get<long long>() < 1 || f->get<long long>() > L::max_devices_per_node)
            fail(*f, "network.devices_per_node",
                 "expected an integer in [1, " + std::to_string(L::max_devices_per_node) + "], found " + f->dump());
        sc.network.devices_per_node = static_cast<std::uint32_t>(f->get<long long>());
    }
    if (const auto f = nw.find("activation_mb"); f != nw.end())
        sc.activation_mb = array(*f, "network.activation_mb", sc.microbatches, 0.0, L::max_memory_mb, "MB");
}

/// Decodes a scenario from parsed JSON; `fail(value, path, reason)` must throw. Every number
/// must lie in its range (scenario_limits, shared with scenario::validate()), quoted in the error.
template <class Fail>
scenario scenario_from_json_impl(const nlohmann::json& j, Fail&& fail) {
    using nlohmann::json;
    using L = scenario_limits;
    if (!j.is_object()) fail(j, "", "the scenario must be a JSON object");
    auto field = [&](const json& obj, const std::string& base, const char* name) -> const json& {
        const std::string p = base.empty() ? std::string(name) : base + "." + name;
        const auto it = obj.find(name);
        if (it == obj.end()) fail(obj, p, "missing required field");
        return *it;
    };
    auto number = [&](const json& v, const std::string& p, double lo, double hi, const std::string& unit) {
        const auto bad = [&] { fail(v, p, "expected a number in " + range_text(lo, hi) + " " + unit + ", found " + v.dump()); };
        if (!v.is_number()) bad();
        const double x = v.get<double>();
        if (!std::isfinite(x) || x < lo || x > hi) bad();
        return x;
    };
    auto array = [&](const json& v, const std::string& p, std::size_t n, double lo, double hi, const std::string& unit) {
        if (!v.is_array())
            fail(v, p, "expected an array of " + std::to_string(n) + " numbers, found " + std::string(v.type_name()));
        if (v.size() != n)
            fail(v, p, "expected " + std::to_string(n) + " values (one per " +
                           (p.find("activation_mb") != std::string::npos ? std::string("micro-batch") : std::string("stage")) +
                           "), found " + std::to_string(v.size()));
        std::vector<double> out(n);
        for (std::size_t k = 0; k < n; ++k) out[k] = number(v[k], p + "[" + std::to_string(k) + "]", lo, hi, unit);
        return out;
    };
    scenario sc;
    const json& st = field(j, "", "stages");
    if (!st.is_number_integer() || st.get<long long>() < 1 || st.get<long long>() > L::max_stages)
        fail(st, "stages", "expected an integer in [1, " + std::to_string(L::max_stages) + "], found " + st.dump());
    sc.stages = static_cast<std::size_t>(st.get<long long>());
    const json& mbs = field(j, "", "microbatches");
    if (!mbs.is_array() || mbs.empty()) fail(mbs, "microbatches", "expected a non-empty array of micro-batches");
    sc.microbatches = mbs.size();
    const std::size_t S = sc.stages, M = sc.microbatches;
    sc.forward_ms.resize(S * M);
    sc.backward_ms.resize(S * M);
    sc.stored_mb.resize(S * M);
    sc.peak_mb.resize(S * M);
    for (std::size_t m = 0; m < M; ++m) {
        const std::string base = "microbatches[" + std::to_string(m) + "]";
        const json& mb = mbs[m];
        if (!mb.is_object()) fail(mb, base, "expected an object with forward_ms, backward_ms, stored_mb, peak_mb");
        const auto f = array(field(mb, base, "forward_ms"), base + ".forward_ms", S, 0.0, L::max_time_ms, "ms");
        const auto b = array(field(mb, base, "backward_ms"), base + ".backward_ms", S, 0.0, L::max_time_ms, "ms");
        const auto s = array(field(mb, base, "stored_mb"), base + ".stored_mb", S, 0.0, L::max_memory_mb, "MB");
        const json& pj = field(mb, base, "peak_mb");
        const auto p = array(pj, base + ".peak_mb", S, 0.0, L::max_memory_mb, "MB");
        for (std::size_t k = 0; k < S; ++k) {
            if (p[k] < s[k])
                fail(pj[k], base + ".peak_mb[" + std::to_string(k) + "]",
                     "peak_mb must be >= stored_mb (the peak includes the stored activations)");
            sc.forward_ms[sc.at(m, k)] = f[k];
            sc.backward_ms[sc.at(m, k)] = b[k];
            sc.stored_mb[sc.at(m, k)] = s[k];
            sc.peak_mb[sc.at(m, k)] = p[k];
        }
    }
    sc.model_state_mb = array(field(j, "", "model_state_mb"), "model_state_mb", S, 0.0, L::max_memory_mb, "MB");
    if (const auto it = j.find("network"); it != j.end()) read_network_json(*it, sc, fail, number, array);
    read_layout_json(j, sc, fail, array);
    return sc;
}

}  // namespace detail

/// Decodes a scenario from a parsed value; errors name `source` and the field path.
[[nodiscard]] inline scenario scenario_from_json(const nlohmann::json& j, const std::string& source) {
    return detail::scenario_from_json_impl(j, [&](const nlohmann::json&, const std::string& path, const std::string& reason) {
        throw input_error(source, 0, path, reason);
    });
}

/// Decodes a parsed scenario file; errors name the file, the line and column of the value (for
/// a missing field, of the object that lacks it) and the field path.
[[nodiscard]] inline scenario scenario_from_json(const json_document& doc) {
    return detail::scenario_from_json_impl(
        doc.root(), [&](const nlohmann::json& at, const std::string& path, const std::string& reason) {
            doc.fail(at, path, reason);
        });
}

/// Parses scenario JSON text; `source` names it in errors. One linear pass (json_document):
/// nesting deeper than 64 levels, invalid JSON and numbers beyond a double (`1e400`) are errors
/// located by line and column.
[[nodiscard]] inline scenario parse_scenario_json(std::string_view text, const std::string& source) {
    const json_document doc(text, source);
    return scenario_from_json(doc);
}

/// Reads a scenario file. Throws input_error naming the file, line and field path.
[[nodiscard]] inline scenario read_scenario_json(const std::filesystem::path& path) {
    return parse_scenario_json(read_text_file(path), path.string());
}

/// ADL customization point: json -> scenario (errors name the source "<json>").
inline void from_json(const nlohmann::json& j, scenario& sc) { sc = scenario_from_json(j, "<json>"); }

/// ADL customization point: scenario -> json (the file format above).
inline void to_json(nlohmann::json& j, const scenario& sc) {
    using nlohmann::json;
    j = json::object();
    j["stages"] = sc.stages;
    json mbs = json::array();
    for (std::size_t m = 0; m < sc.microbatches; ++m) {
        auto row = [&](const std::vector<double>& v) {
            std::vector<double> out(sc.stages);
            for (std::size_t k = 0; k < sc.stages; ++k) out[k] = v[sc.at(m, k)];
            return out;
        };
        mbs.push_back({{"forward_ms", row(sc.forward_ms)},
                       {"backward_ms", row(sc.backward_ms)},
                       {"stored_mb", row(sc.stored_mb)},
                       {"peak_mb", row(sc.peak_mb)}});
    }
    j["microbatches"] = std::move(mbs);
    j["model_state_mb"] = sc.model_state_mb;
    json nw = {{"latency_ms", sc.network.latency_ms},
               {"bandwidth_gbps", sc.network.bandwidth_gbps},
               {"intra_node_latency_ms", sc.network.intra_node_latency_ms},
               {"intra_node_bandwidth_gbps", sc.network.intra_node_bandwidth_gbps},
               {"devices_per_node", sc.network.devices_per_node}};
    if (!sc.activation_mb.empty()) nw["activation_mb"] = sc.activation_mb;
    j["network"] = std::move(nw);
    if (sc.devices != 0 || !sc.placement.empty()) {
        j["devices"] = sc.device_count();
        std::vector<std::size_t> pl(sc.stages);
        for (std::size_t v = 0; v < sc.stages; ++v) pl[v] = sc.device_of(v);
        j["placement"] = pl;
    }
    if (!sc.checkpoint_ratio.empty()) j["checkpoint_ratio"] = sc.checkpoint_ratio;
}

/// The result JSON of `pipeplan simulate --json` (docs/formats.md).
[[nodiscard]] inline nlohmann::json simulation_to_json(const simulation_result& r, const pipeline_schedule& s) {
    using nlohmann::json;
    json j;
    j["schedule"] = s.name;
    j["devices"] = s.placement.devices();
    j["chunks"] = s.placement.chunks();
    j["makespan_ms"] = r.makespan_ms;
    j["lower_bound_ms"] = r.lower_bound_ms;
    j["makespan_over_lower_bound"] = r.makespan_over_lower_bound;
    j["peak_memory_mb"] = r.peak_memory_mb;
    j["bubble_fraction"] = r.bubble_fraction;
    j["busy_ms"] = r.busy_ms;
    json orders = json::array();
    for (std::size_t d = 0; d < s.orders.size(); ++d) orders.push_back(order_labels(s, d));
    j["device_orders"] = std::move(orders);
    return j;
}

}  // namespace pipeplan::schedule
