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
// Errors throw pipeplan::input_error(file, line, field path, reason), e.g.
//   "s.json:7: column 'microbatches[3].forward_ms[2]': expected a number >= 0, found -1".
// The line is found by re-scanning the text for the field's position (0 when unknown).
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
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/scenario.hpp"
#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::schedule {

namespace detail {

/// Line (1-based) where the value at `path` (like "microbatches[3].forward_ms[2]") starts in
/// the JSON text `text`, or 0. A small scanner over already-valid JSON.
inline std::size_t json_line_of(std::string_view text, std::string_view path) {
    struct frame {
        bool array;
        std::size_t index;
        std::string key;
        std::size_t base;  // length of the path prefix of the container
    };
    std::vector<frame> stack;
    std::string cur;  // path of the container being scanned
    std::size_t line = 1, i = 0;
    std::string pending_key;
    bool have_key = false;
    auto value_path = [&]() {
        if (stack.empty()) return std::string();
        const frame& f = stack.back();
        std::string p = cur;
        if (f.array) {
            p += "[" + std::to_string(f.index) + "]";
        } else {
            if (!p.empty()) p += ".";
            p += pending_key;
        }
        return p;
    };
    auto skip_ws = [&] {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
            if (text[i] == '\n') ++line;
            ++i;
        }
    };
    auto read_string = [&] {
        std::string s;
        ++i;  // opening quote
        while (i < text.size() && text[i] != '"') {
            if (text[i] == '\\' && i + 1 < text.size()) {
                s += text[i + 1];
                i += 2;
            } else {
                s += text[i++];
            }
        }
        ++i;
        return s;
    };
    bool expect_value = true;
    while (i < text.size()) {
        skip_ws();
        if (i >= text.size()) break;
        const char c = text[i];
        if (!stack.empty() && !stack.back().array && !have_key && c == '"') {
            pending_key = read_string();
            have_key = true;
            skip_ws();
            if (i < text.size() && text[i] == ':') ++i;
            expect_value = true;
            continue;
        }
        if (c == ',') {
            if (!stack.empty() && stack.back().array) ++stack.back().index;
            have_key = false;
            ++i;
            continue;
        }
        if (c == '}' || c == ']') {
            if (!stack.empty()) {
                cur.resize(stack.back().base);
                stack.pop_back();
            }
            have_key = false;
            ++i;
            continue;
        }
        if (expect_value) {
            const std::string vp = value_path();
            if (vp == path) return line;
            if (c == '{' || c == '[') {
                const std::size_t base = cur.size();
                cur = stack.empty() ? std::string() : vp;
                stack.push_back({c == '[', 0, {}, base});
                have_key = false;
                ++i;
                continue;
            }
            if (c == '"') {
                (void)read_string();
            } else {
                while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' && text[i] != '\n' &&
                       text[i] != ' ' && text[i] != '\t' && text[i] != '\r')
                    ++i;
            }
            continue;
        }
        ++i;
    }
    return 0;
}

/// Decodes the optional `devices`, `placement` and `checkpoint_ratio` fields into `sc` (whose
/// stages are known); `fail(path, reason)` must throw, `array(v, path, n)` reads n numbers.
template <class Fail, class Array>
void read_layout_json(const nlohmann::json& j, scenario& sc, Fail& fail, Array& array) {
    const std::size_t S = sc.stages;
    if (const auto it = j.find("devices"); it != j.end()) {
        if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > static_cast<long long>(S))
            fail("devices", "expected an integer in 1.." + std::to_string(S) + " (at most one device per stage), found " +
                                it->dump());
        sc.devices = static_cast<std::size_t>(it->get<long long>());
    }
    const std::size_t D = sc.device_count();
    if (const auto it = j.find("placement"); it != j.end()) {
        if (!it->is_array() || it->size() != S)
            fail("placement", "expected an array of " + std::to_string(S) + " device indices (one per stage), found " +
                                  it->dump());
        std::vector<char> used(D, 0);
        for (std::size_t v = 0; v < S; ++v) {
            const auto& x = (*it)[v];
            if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() >= static_cast<long long>(D))
                fail("placement[" + std::to_string(v) + "]",
                     "expected a device index in 0.." + std::to_string(D - 1) + ", found " + x.dump());
            sc.placement.push_back(static_cast<std::uint32_t>(x.get<long long>()));
            used[sc.placement.back()] = 1;
        }
        for (std::size_t d = 0; d < D; ++d)
            if (!used[d]) fail("placement", "no stage runs on device " + std::to_string(d));
    } else if (D != S) {
        fail("devices", std::to_string(D) + " devices for " + std::to_string(S) + " stages need a 'placement'");
    }
    if (const auto it = j.find("checkpoint_ratio"); it != j.end()) {
        sc.checkpoint_ratio = array(*it, "checkpoint_ratio", S);
        for (std::size_t v = 0; v < S; ++v)
            if (sc.checkpoint_ratio[v] > 1.0)
                fail("checkpoint_ratio[" + std::to_string(v) + "]",
                     "expected a ratio in [0, 1], found " + std::to_string(sc.checkpoint_ratio[v]));
    }
}

/// Decodes a scenario from parsed JSON; `fail(path, reason)` must throw.
template <class Fail>
scenario scenario_from_json_impl(const nlohmann::json& j, Fail&& fail) {
    using nlohmann::json;
    if (!j.is_object()) fail("", "the scenario must be a JSON object");
    auto field = [&](const json& obj, const std::string& base, const char* name) -> const json& {
        const std::string p = base.empty() ? std::string(name) : base + "." + name;
        const auto it = obj.find(name);
        if (it == obj.end()) fail(p, "missing required field");
        return *it;
    };
    auto number = [&](const json& v, const std::string& p) {
        if (!v.is_number()) fail(p, "expected a number >= 0, found " + v.dump());
        const double x = v.get<double>();
        if (!std::isfinite(x) || x < 0) fail(p, "expected a number >= 0, found " + v.dump());
        return x;
    };
    auto array = [&](const json& v, const std::string& p, std::size_t n) {
        if (!v.is_array()) fail(p, "expected an array of " + std::to_string(n) + " numbers, found " + std::string(v.type_name()));
        if (v.size() != n)
            fail(p, "expected " + std::to_string(n) + " values (one per " +
                        (p.find("activation_mb") != std::string::npos ? std::string("micro-batch") : std::string("stage")) +
                        "), found " + std::to_string(v.size()));
        std::vector<double> out(n);
        for (std::size_t k = 0; k < n; ++k) out[k] = number(v[k], p + "[" + std::to_string(k) + "]");
        return out;
    };
    scenario sc;
    const json& st = field(j, "", "stages");
    if (!st.is_number_integer() || st.get<long long>() < 1 || st.get<long long>() > 1000000)
        fail("stages", "expected an integer >= 1, found " + st.dump());
    sc.stages = static_cast<std::size_t>(st.get<long long>());
    const json& mbs = field(j, "", "microbatches");
    if (!mbs.is_array() || mbs.empty()) fail("microbatches", "expected a non-empty array of micro-batches");
    sc.microbatches = mbs.size();
    const std::size_t S = sc.stages, M = sc.microbatches;
    sc.forward_ms.resize(S * M);
    sc.backward_ms.resize(S * M);
    sc.stored_mb.resize(S * M);
    sc.peak_mb.resize(S * M);
    for (std::size_t m = 0; m < M; ++m) {
        const std::string base = "microbatches[" + std::to_string(m) + "]";
        const json& mb = mbs[m];
        if (!mb.is_object()) fail(base, "expected an object with forward_ms, backward_ms, stored_mb, peak_mb");
        auto f = array(field(mb, base, "forward_ms"), base + ".forward_ms", S);
        auto b = array(field(mb, base, "backward_ms"), base + ".backward_ms", S);
        auto s = array(field(mb, base, "stored_mb"), base + ".stored_mb", S);
        auto p = array(field(mb, base, "peak_mb"), base + ".peak_mb", S);
        for (std::size_t k = 0; k < S; ++k)
            if (p[k] < s[k])
                fail(base + ".peak_mb[" + std::to_string(k) + "]",
                     "peak_mb must be >= stored_mb (the peak includes the stored activations)");
        for (std::size_t k = 0; k < S; ++k) {
            sc.forward_ms[sc.at(m, k)] = f[k];
            sc.backward_ms[sc.at(m, k)] = b[k];
            sc.stored_mb[sc.at(m, k)] = s[k];
            sc.peak_mb[sc.at(m, k)] = p[k];
        }
    }
    sc.model_state_mb = array(field(j, "", "model_state_mb"), "model_state_mb", S);
    if (const auto it = j.find("network"); it != j.end()) {
        const json& nw = *it;
        if (!nw.is_object()) fail("network", "expected an object");
        auto opt = [&](const char* name, double& out) {
            if (const auto f = nw.find(name); f != nw.end()) out = number(*f, std::string("network.") + name);
        };
        opt("latency_ms", sc.network.latency_ms);
        opt("bandwidth_gbps", sc.network.bandwidth_gbps);
        opt("intra_node_latency_ms", sc.network.intra_node_latency_ms);
        opt("intra_node_bandwidth_gbps", sc.network.intra_node_bandwidth_gbps);
        if (const auto f = nw.find("devices_per_node"); f != nw.end()) {
            if (!f->is_number_integer() || f->get<long long>() < 1)
                fail("network.devices_per_node", "expected an integer >= 1, found " + f->dump());
            sc.network.devices_per_node = static_cast<std::uint32_t>(f->get<long long>());
        }
        if (const auto f = nw.find("activation_mb"); f != nw.end())
            sc.activation_mb = array(*f, "network.activation_mb", M);
    }
    read_layout_json(j, sc, fail, array);
    return sc;
}

}  // namespace detail

/// Decodes a scenario; errors name `source` and the field path (and the line when `text`, the
/// JSON text `j` was parsed from, is given).
[[nodiscard]] inline scenario scenario_from_json(const nlohmann::json& j, const std::string& source,
                                                 std::string_view text = {}) {
    return detail::scenario_from_json_impl(j, [&](const std::string& path, const std::string& reason) {
        // The field's line, or (for a missing field) the line of the object that lacks it.
        std::size_t line = 0;
        for (std::string p = path; !text.empty() && !p.empty() && line == 0;) {
            line = detail::json_line_of(text, p);
            const auto cut = p.find_last_of(".[");
            p = cut == std::string::npos ? std::string() : p.substr(0, cut);
        }
        throw input_error(source, line, path, reason);
    });
}

/// Parses scenario JSON text; `source` names it in errors.
[[nodiscard]] inline scenario parse_scenario_json(std::string_view text, const std::string& source) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        // e.byte is 1-based offset of the error: count the lines before it.
        std::size_t line = 1;
        const std::size_t end = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
        for (std::size_t k = 0; k < end; ++k) line += text[k] == '\n';
        std::string what = e.what();
        if (const auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
        throw input_error(source, line, "", "invalid JSON: " + what);
    }
    return scenario_from_json(j, source, text);
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
    for (const auto& dev : s.orders) {
        json o = json::array();
        for (const op& x : dev) o.push_back(op_label(s, x));
        orders.push_back(std::move(o));
    }
    j["device_orders"] = std::move(orders);
    return j;
}

}  // namespace pipeplan::schedule
