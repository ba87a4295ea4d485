// pipeplan/compare/report.hpp — a compare_report as JSON, CSV and a terminal table.
//
// JSON (docs/compare.md): {"seed", "iterations", "gpus", "settings": [{"max_seqlen", "tokens",
// "memory_limit_mb", "best_baseline", "real_tokens" [per iteration], "samples" [per iteration],
// "methods": {"padding" | "packing" | "tokens" | "dynapipe" | "pipeplan": {"feasible",
// "reason" (when infeasible), "tokens_per_s", "samples_per_s", "iteration_ms", "efficiency",
// "peak_memory_mb", "memory_limit_mb", "makespan_over_lower_bound", "planning_ms",
// "speedup_over_best_baseline", "config" {knob: value}, "per_iteration" {"iteration_ms",
// "planning_ms", "lower_bound_ms", "peak_memory_mb", "computed_tokens"}, "schedules",
// "splits"}}, "ablation" {"baseline", "splits", "schedules", "iteration_ms" [split][schedule]}}]}.
// Numbers of an infeasible method (and ablation cells) are null. CSV: one row per setting and
// method with every scalar of the JSON.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/compare/sweep.hpp"

namespace pipeplan::compare {

namespace detail {

inline nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

inline nlohmann::json method_json(const method_summary& m, double limit_mb) {
    nlohmann::json j;
    j["feasible"] = m.feasible;
    if (!m.feasible) j["reason"] = m.reason;
    const auto num = [&](double x) { return m.feasible ? number_or_null(x) : nlohmann::json(nullptr); };
    j["tokens_per_s"] = num(m.tokens_per_s);
    j["samples_per_s"] = num(m.samples_per_s);
    j["iteration_ms"] = num(m.mean_iteration_ms);
    j["efficiency"] = num(m.efficiency);
    j["peak_memory_mb"] = num(m.max_peak_memory_mb);
    j["memory_limit_mb"] = limit_mb;
    j["makespan_over_lower_bound"] = num(m.makespan_over_lower_bound);
    j["planning_ms"] = num(m.mean_planning_ms);
    j["speedup_over_best_baseline"] = m.feasible && m.speedup_over_best_baseline > 0 ? nlohmann::json(m.speedup_over_best_baseline)
                                                                                    : nlohmann::json(nullptr);
    nlohmann::json cfg = nlohmann::json::object();
    for (const auto& [k, v] : m.config) cfg[k] = v;
    j["config"] = cfg;
    j["per_iteration"] = {{"iteration_ms", m.iteration_ms},
                          {"planning_ms", m.planning_ms},
                          {"lower_bound_ms", m.lower_bound_ms},
                          {"peak_memory_mb", m.peak_memory_mb},
                          {"computed_tokens", m.computed_tokens}};
    j["schedules"] = m.schedules;
    j["splits"] = m.splits;
    return j;
}

}  // namespace detail

/// The report as one JSON object (see the file comment).
[[nodiscard]] inline nlohmann::json to_json(const compare_report& rep) {
    nlohmann::json j;
    j["seed"] = rep.seed;
    j["iterations"] = rep.iterations;
    j["gpus"] = rep.gpus;
    nlohmann::json settings = nlohmann::json::array();
    for (const auto& s : rep.settings) {
        nlohmann::json js;
        js["max_seqlen"] = s.point.max_seqlen_tokens;
        js["tokens"] = s.point.tokens;
        js["memory_limit_mb"] = s.memory_limit_mb;
        js["best_baseline"] = s.best_baseline.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.best_baseline);
        js["real_tokens"] = s.real_tokens;
        js["samples"] = s.samples;
        nlohmann::json ms = nlohmann::json::object();
        for (const auto& m : s.methods) ms[std::string(to_string(m.kind))] = detail::method_json(m, s.memory_limit_mb);
        js["methods"] = ms;
        if (s.ablation.done) {
            nlohmann::json cells = nlohmann::json::array();
            for (const auto& row : s.ablation.iteration_ms)
                cells.push_back({detail::number_or_null(row[0]), detail::number_or_null(row[1])});
            js["ablation"] = {{"baseline", s.ablation.baseline},
                              {"splits", s.ablation.splits},
                              {"schedules", s.ablation.schedules},
                              {"iteration_ms", cells}};
        }
        settings.push_back(std::move(js));
    }
    j["settings"] = std::move(settings);
    return j;
}

/// The CSV columns, in order.
inline constexpr const char* csv_header =
    "max_seqlen,tokens,method,feasible,tokens_per_s,samples_per_s,iteration_ms,efficiency,peak_memory_mb,"
    "memory_limit_mb,makespan_over_lower_bound,planning_ms,speedup_over_best_baseline,config,reason";

/// One CSV row per setting and method (empty cells where infeasible; config as k=v;k=v).
[[nodiscard]] inline std::string to_csv(const compare_report& rep) {
    std::string out = std::string(csv_header) + "\n";
    const auto num = [](bool ok, double x) {
        if (!ok || !std::isfinite(x)) return std::string();
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.6g", x);
        return std::string(buf);
    };
    const auto quoted = [](std::string s) {
        std::string q = "\"";
        for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
        return q + "\"";
    };
    for (const auto& s : rep.settings)
        for (const auto& m : s.methods) {
            std::string cfg;
            for (const auto& [k, v] : m.config) cfg += (cfg.empty() ? "" : ";") + k + "=" + v;
            const bool f = m.feasible;
            out += std::to_string(s.point.max_seqlen_tokens) + "," + std::to_string(s.point.tokens) + "," +
                   std::string(to_string(m.kind)) + "," + (f ? "true" : "false") + "," + num(f, m.tokens_per_s) + "," +
                   num(f, m.samples_per_s) + "," + num(f, m.mean_iteration_ms) + "," + num(f, m.efficiency) + "," +
                   num(f, m.max_peak_memory_mb) + "," + num(true, s.memory_limit_mb) + "," +
                   num(f, m.makespan_over_lower_bound) + "," + num(f, m.mean_planning_ms) + "," +
                   num(f && m.speedup_over_best_baseline > 0, m.speedup_over_best_baseline) + "," + quoted(cfg) + "," +
                   quoted(f ? "" : m.reason) + "\n";
        }
    return out;
}

/// A method's configuration in a few words, e.g. "packing: 2048-token rows, 1 row per
/// micro-batch, selective recompute, 1F1B (tp 2, pp 4, dp 1)".
[[nodiscard]] inline std::string describe_config(const method_summary& m) {
    std::string knobs, par;
    for (const auto& [k, v] : m.config) {
        if (k == "tp" || k == "pp" || k == "dp") {
            par += (par.empty() ? "" : ", ") + k + " " + v;
            continue;
        }
        std::string w;
        if (k == "mbs") w = v + (v == "1" ? " sample" : " samples") + " per micro-batch";
        else if (k == "rows_per_microbatch") w = v + (v == "1" ? " row" : " rows") + " per micro-batch";
        else if (k == "row_tokens") w = v + "-token rows";
        else if (k == "tokens_per_microbatch") w = v + " tokens per micro-batch";
        else if (k == "recompute") w = v + " recompute";
        else if (k == "schedule") w = v == "1f1b" ? "1F1B" : v;
        else if (k == "split") w = v + " split";
        else w = k + " " + v;
        knobs += (knobs.empty() ? "" : ", ") + w;
    }
    return knobs + (par.empty() ? "" : " (" + par + ")");
}

/// The terminal table: one block per setting, one line per method.
[[nodiscard]] inline std::string to_table(const compare_report& rep) {
    std::string out;
    char buf[512];
    for (const auto& s : rep.settings) {
        std::snprintf(buf, sizeof buf, "max seqlen %d, %lld tokens per global batch, %zu iterations, seed %llu, %.0f MB per device\n",
                      s.point.max_seqlen_tokens, s.point.tokens, rep.iterations, static_cast<unsigned long long>(rep.seed),
                      s.memory_limit_mb);
        out += buf;
        std::snprintf(buf, sizeof buf, "  %-9s %11s %9s %10s %6s %10s %6s %9s %8s  %s\n", "method", "tokens/s", "samples/s",
                      "iter_ms", "eff", "peak_mb", "mk/lb", "plan_ms", "speedup", "configuration");
        out += buf;
        for (const auto& m : s.methods) {
            if (!m.feasible) {
                std::snprintf(buf, sizeof buf, "  %-9s infeasible: ", std::string(to_string(m.kind)).c_str());
                out += buf + m.reason + "\n";
                continue;
            }
            std::snprintf(buf, sizeof buf, "  %-9s %11.0f %9.1f %10.1f %6.3f %10.0f %6.3f %9.2f %7.2fx  ",
                          std::string(to_string(m.kind)).c_str(), m.tokens_per_s, m.samples_per_s, m.mean_iteration_ms,
                          m.efficiency, m.max_peak_memory_mb, m.makespan_over_lower_bound, m.mean_planning_ms,
                          m.speedup_over_best_baseline);
            out += buf + describe_config(m) + "\n";
        }
    }
    return out;
}

}  // namespace pipeplan::compare
