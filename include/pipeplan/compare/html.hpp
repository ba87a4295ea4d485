// pipeplan/compare/html.hpp — the compare report as one self-contained HTML file.
//
// Inline SVG only (no script, no external resource), readable at 1600 px: throughput per
// method against the setting (max sequence length; DynaPipe's Fig. 12/13), batching efficiency
// (Fig. 14), the split × schedule ablation (Fig. 15), the distribution of planning time per
// iteration (Fig. 16), the cost model's leave-one-out error when given (Fig. 17), one Gantt chart
// per method (the first iteration of the representative setting) and a table of every setting.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <sstream>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/compare/report.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/svg.hpp"

namespace pipeplan::compare {

/// What the report says besides the numbers.
struct html_options {
    std::string title = "pipeplan compare";
    std::string description;        ///< model, cluster, data (plain text)
    /// Leave-one-out relative errors of the cost model (|predicted − measured| / measured) by
    /// quantity, e.g. {"time", {...}}, {"memory", {...}}; empty = the section says none.
    std::vector<std::pair<std::string, std::vector<double>>> cost_model_errors;
    std::size_t representative_setting = static_cast<std::size_t>(-1);  ///< Gantt charts; default: the last
};

namespace detail {

inline std::string xml(std::string_view s) { return schedule::detail::xml_escape(s); }

inline const char* method_colour(std::size_t k) {
    static const char* const c[] = {"#7f7f7f", "#1f77b4", "#9467bd", "#ff7f0e", "#d62728", "#2ca02c", "#17becf", "#8c564b"};
    return c[k % 8];
}

/// A named series of y values, one per x position (NaN = no point).
struct series {
    std::string name;
    std::vector<double> y;
};

/// The frame of a chart: title, axes with ticks, labels and the legend; returns the y mapping.
struct chart_frame {
    double w = 780, h = 420, left = 84, right = 200, top = 40, bottom = 64;
    double y_lo = 0, y_hi = 1;
    [[nodiscard]] double px_y(double v) const { return top + (h - top - bottom) * (1 - (v - y_lo) / (y_hi - y_lo)); }
    [[nodiscard]] double plot_w() const { return w - left - right; }
};

inline void open_chart(std::ostringstream& o, chart_frame& f, const std::string& title, const std::string& y_label,
                       const std::string& x_label, double y_max) {
    using schedule::detail::fmt;
    f.y_hi = y_max > 0 ? y_max * 1.08 : 1.0;
    const double step = schedule::detail::nice_step(f.y_hi - f.y_lo, 6);
    o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(f.w, 0) << "\" height=\"" << fmt(f.h, 0)
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
    o << "<text x=\"" << fmt(f.left, 0) << "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" << schedule::detail::xml_escape(title)
      << "</text>\n";
    for (double v = 0; v <= f.y_hi + 1e-9; v += step) {
        o << "<line x1=\"" << fmt(f.left, 0) << "\" x2=\"" << fmt(f.left + f.plot_w(), 0) << "\" y1=\"" << fmt(f.px_y(v)) << "\" y2=\""
          << fmt(f.px_y(v)) << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << fmt(f.left - 6, 0) << "\" y=\"" << fmt(f.px_y(v) + 4)
          << "\" text-anchor=\"end\">" << fmt(v, step < 1 ? 2 : 0) << "</text>\n";
    }
    o << "<line x1=\"" << fmt(f.left, 0) << "\" x2=\"" << fmt(f.left, 0) << "\" y1=\"" << fmt(f.top, 0) << "\" y2=\""
      << fmt(f.h - f.bottom, 0) << "\" stroke=\"#000\"/>\n";
    o << "<text transform=\"translate(18," << fmt((f.top + f.h - f.bottom) / 2, 0) << ") rotate(-90)\" text-anchor=\"middle\">"
      << schedule::detail::xml_escape(y_label) << "</text>\n";
    o << "<text x=\"" << fmt(f.left + f.plot_w() / 2, 0) << "\" y=\"" << fmt(f.h - 14, 0) << "\" text-anchor=\"middle\">"
      << schedule::detail::xml_escape(x_label) << "</text>\n";
}

inline void legend(std::ostringstream& o, const chart_frame& f, const std::vector<std::string>& names,
                   const std::vector<std::string>& colours) {
    using schedule::detail::fmt;
    for (std::size_t k = 0; k < names.size(); ++k) {
        const double y = f.top + 10 + 22.0 * static_cast<double>(k);
        o << "<rect x=\"" << fmt(f.w - f.right + 14, 0) << "\" y=\"" << fmt(y - 9) << "\" width=\"14\" height=\"10\" fill=\"" << colours[k]
          << "\"/><text x=\"" << fmt(f.w - f.right + 34, 0) << "\" y=\"" << fmt(y) << "\">" << schedule::detail::xml_escape(names[k])
          << "</text>\n";
    }
}

/// The largest finite y of `ss` (0 when none).
inline double finite_max(const std::vector<series>& ss) {
    double y_max = 0;
    for (const auto& s : ss)
        for (double v : s.y)
            if (std::isfinite(v)) y_max = std::max(y_max, v);
    return y_max;
}

/// A line chart of `ss` over categorical x positions labelled `xs`.
inline std::string line_chart(const std::string& title, const std::vector<std::string>& xs, const std::vector<series>& ss,
                              const std::string& y_label, const std::string& x_label) {
    using schedule::detail::fmt;
    std::ostringstream o;
    chart_frame f;
    open_chart(o, f, title, y_label, x_label, finite_max(ss));
    const auto px_x = [&](std::size_t i) {
        return f.left + f.plot_w() * (static_cast<double>(i) + 0.5) / static_cast<double>(std::max<std::size_t>(1, xs.size()));
    };
    for (std::size_t i = 0; i < xs.size(); ++i)
        o << "<text x=\"" << fmt(px_x(i)) << "\" y=\"" << fmt(f.h - f.bottom + 18, 0) << "\" text-anchor=\"middle\">"
          << schedule::detail::xml_escape(xs[i]) << "</text>\n";
    std::vector<std::string> names, colours;
    for (std::size_t k = 0; k < ss.size(); ++k) {
        std::string pts;
        for (std::size_t i = 0; i < ss[k].y.size() && i < xs.size(); ++i) {
            if (!std::isfinite(ss[k].y[i])) continue;
            pts += fmt(px_x(i)) + "," + fmt(f.px_y(ss[k].y[i])) + " ";
            o << "<circle cx=\"" << fmt(px_x(i)) << "\" cy=\"" << fmt(f.px_y(ss[k].y[i])) << "\" r=\"4\" fill=\"" << method_colour(k)
              << "\"/>\n";
        }
        o << "<polyline points=\"" << pts << "\" fill=\"none\" stroke-width=\"2.5\" stroke=\"" << method_colour(k) << "\"/>\n";
        names.push_back(ss[k].name);
        colours.push_back(method_colour(k));
    }
    legend(o, f, names, colours);
    o << "</svg>\n";
    return o.str();
}

/// A grouped bar chart: one group per x label, one bar per series.
inline std::string bar_chart(const std::string& title, const std::vector<std::string>& xs, const std::vector<series>& ss,
                             const std::string& y_label, const std::string& x_label) {
    using schedule::detail::fmt;
    std::ostringstream o;
    chart_frame f;
    open_chart(o, f, title, y_label, x_label, finite_max(ss));
    const double group_w = f.plot_w() / static_cast<double>(std::max<std::size_t>(1, xs.size()));
    const double bar_w = group_w * 0.8 / static_cast<double>(std::max<std::size_t>(1, ss.size()));
    std::vector<std::string> names, colours;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        o << "<text x=\"" << fmt(f.left + group_w * (static_cast<double>(i) + 0.5)) << "\" y=\"" << fmt(f.h - f.bottom + 18, 0)
          << "\" text-anchor=\"middle\">" << schedule::detail::xml_escape(xs[i]) << "</text>\n";
        for (std::size_t k = 0; k < ss.size(); ++k) {
            const double v = i < ss[k].y.size() ? ss[k].y[i] : NAN;
            const double x = f.left + group_w * (static_cast<double>(i) + 0.1) + bar_w * static_cast<double>(k);
            if (!std::isfinite(v)) {
                o << "<text x=\"" << fmt(x + bar_w / 2) << "\" y=\"" << fmt(f.px_y(0) - 4) << "\" text-anchor=\"middle\" font-size=\"11\">n/a</text>\n";
                continue;
            }
            o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(f.px_y(v)) << "\" width=\"" << fmt(bar_w * 0.92) << "\" height=\""
              << fmt(f.px_y(0) - f.px_y(v)) << "\" fill=\"" << method_colour(k + 1) << "\"/>\n";
        }
    }
    for (std::size_t k = 0; k < ss.size(); ++k) names.push_back(ss[k].name), colours.push_back(method_colour(k + 1));
    legend(o, f, names, colours);
    o << "</svg>\n";
    return o.str();
}

/// A power of ten as a tick label: 0.001, 0.01, ..., 1, 10, 100, ...
inline std::string log_tick(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

/// Empirical CDFs of `samples` (x on a log10 axis when `log_x`).
inline std::string cdf_chart(const std::string& title, const std::vector<series>& samples, const std::string& x_label, bool log_x,
                             std::size_t colour_offset = 0) {
    using schedule::detail::fmt;
    std::ostringstream o;
    chart_frame f;
    open_chart(o, f, title, "fraction of samples ≤ x", x_label, 1.0 / 1.08);
    double lo = INFINITY, hi = -INFINITY;
    const auto tx = [&](double v) { return log_x ? std::log10(std::max(v, 1e-3)) : v; };  // log axis from 0.001
    for (const auto& s : samples)
        for (double v : s.y)
            if (std::isfinite(v)) lo = std::min(lo, tx(v)), hi = std::max(hi, tx(v));
    if (!(hi > lo)) lo = std::isfinite(lo) ? lo - 1 : 0, hi = lo + 2;
    if (log_x) lo = std::floor(lo), hi = std::ceil(hi);
    const auto px_x = [&](double v) { return f.left + f.plot_w() * (tx(v) - lo) / (hi - lo); };
    const double step = log_x ? 1.0 : schedule::detail::nice_step(hi - lo, 6);
    for (double t = log_x ? lo : std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) {
        const double v = log_x ? std::pow(10.0, t) : t;
        o << "<text x=\"" << fmt(px_x(v)) << "\" y=\"" << fmt(f.h - f.bottom + 18, 0) << "\" text-anchor=\"middle\">"
          << (log_x ? log_tick(v) : fmt(v, step < 1 ? 2 : 0)) << "</text>\n";
    }
    std::vector<std::string> names, colours;
    for (std::size_t k = 0; k < samples.size(); ++k) {
        std::vector<double> v;
        for (double x : samples[k].y)
            if (std::isfinite(x)) v.push_back(x);
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        std::string pts;
        for (std::size_t i = 0; i < v.size(); ++i)
            pts += fmt(px_x(v[i])) + "," + fmt(f.px_y(static_cast<double>(i + 1) / static_cast<double>(v.size()))) + " ";
        o << "<polyline points=\"" << pts << "\" fill=\"none\" stroke-width=\"2.5\" stroke=\"" << method_colour(k + colour_offset)
          << "\"/>\n";
        names.push_back(samples[k].name);
        colours.push_back(method_colour(k + colour_offset));
    }
    legend(o, f, names, colours);
    o << "</svg>\n";
    return o.str();
}

inline std::string setting_label(const compare_report& rep, const setting_result& s) {
    bool tokens_vary = false;
    for (const auto& t : rep.settings) tokens_vary = tokens_vary || t.point.tokens != rep.settings.front().point.tokens;
    return std::to_string(s.point.max_seqlen_tokens) + (tokens_vary ? " / " + std::to_string(s.point.tokens) : std::string());
}

/// Throughput and efficiency charts (per method, per setting).
inline void method_charts(std::ostringstream& o, const compare_report& rep, const std::string& x_label) {
    std::vector<std::string> xs;
    for (const auto& s : rep.settings) xs.push_back(setting_label(rep, s));
    std::vector<series> tps, eff;
    for (method m : all_methods) {
        series a{std::string(to_string(m)), {}}, b{std::string(to_string(m)), {}};
        for (const auto& s : rep.settings) {
            const auto& ms = s.methods[static_cast<std::size_t>(m)];
            a.y.push_back(ms.feasible ? ms.tokens_per_s / 1000.0 : NAN);
            b.y.push_back(ms.feasible ? ms.efficiency : NAN);
        }
        tps.push_back(std::move(a));
        eff.push_back(std::move(b));
    }
    o << "<h2>Throughput</h2>\n<p>Real (unpadded, truncated) tokens per second of simulated iteration time; each method at its "
         "best knobs and configuration of the setting. Missing points: infeasible (see the table).</p>\n"
      << line_chart("Throughput per method", xs, tps, "throughput (thousand real tokens / s)", x_label);
    o << "<h2>Batching efficiency</h2>\n<p>Real tokens / computed tokens (padding included).</p>\n"
      << line_chart("Batching efficiency", xs, eff, "real tokens / computed tokens", x_label);
}

/// The split × schedule ablation (throughput relative to the baseline split under 1F1B).
inline void ablation_chart(std::ostringstream& o, const compare_report& rep, const std::string& x_label) {
    std::vector<std::string> xs;
    std::vector<series> ss(4);
    const char* names[] = {"baseline split + 1F1B", "baseline split + adaptive", "exact split + 1F1B", "exact split + adaptive"};
    for (std::size_t k = 0; k < 4; ++k) ss[k].name = names[k];
    for (const auto& s : rep.settings) {
        if (!s.ablation.done) continue;
        xs.push_back(setting_label(rep, s) + " (" + s.ablation.baseline + ")");
        const double ref = s.ablation.iteration_ms[0][0];
        for (std::size_t k = 0; k < 4; ++k) ss[k].y.push_back(ref / s.ablation.iteration_ms[k / 2][k % 2]);
    }
    o << "<h2>Ablation: split × schedule</h2>\n<p>Throughput relative to the best baseline's micro-batches under 1F1B in their "
         "order, at pipeplan's configuration (adaptive: with its order search).</p>\n";
    if (xs.empty()) o << "<p>No ablation (no feasible baseline or pipeplan).</p>\n";
    else o << bar_chart("Split × schedule", xs, ss, "throughput / (baseline split + 1F1B)", x_label + " (baseline)");
}

inline void planning_chart(std::ostringstream& o, const compare_report& rep) {
    std::vector<series> ss;
    for (method m : all_methods) {
        series a{std::string(to_string(m)), {}};
        for (const auto& s : rep.settings) {
            const auto& ms = s.methods[static_cast<std::size_t>(m)];
            a.y.insert(a.y.end(), ms.planning_ms.begin(), ms.planning_ms.end());
        }
        ss.push_back(std::move(a));
    }
    o << "<h2>Planning time per iteration</h2>\n<p>Wall time to form one iteration's micro-batches (baselines) or plan it end to end "
         "(split, schedule, lowering, validation: dynapipe, pipeplan), every iteration of every setting, one thread.</p>\n"
      << cdf_chart("Planning time per iteration (CDF)", ss, "planning time per iteration (ms, log scale)", true);
}

inline void error_chart(std::ostringstream& o, const html_options& h) {
    o << "<h2>Cost model: leave-one-out error</h2>\n";
    if (h.cost_model_errors.empty()) {
        o << "<p>Not available for this cost model (leave-one-out needs a profiled model).</p>\n";
        return;
    }
    std::vector<series> ss;
    for (const auto& [name, v] : h.cost_model_errors) {
        series a{name, {}};
        for (double e : v) a.y.push_back(100.0 * e);
        ss.push_back(std::move(a));
    }
    o << "<p>Each interior profiled point predicted from its neighbours with the interpolation the comparison uses; "
         "relative error |predicted − measured| / measured (errors below 0.001 % drawn at 0.001 %).</p>\n"
      << cdf_chart("Leave-one-out relative error (CDF)", ss, "relative error (%, log scale)", true, 5);
}

inline void gantt_charts(std::ostringstream& o, const compare_report& rep, const html_options& h) {
    if (rep.settings.empty()) return;
    const std::size_t k = std::min(h.representative_setting, rep.settings.size() - 1);
    const auto& s = rep.settings[k];
    o << "<h2>One iteration per method</h2>\n<p>The first iteration of the setting " << xml(setting_label(rep, s))
      << " (max seqlen[ / tokens]), replica 0; colour = micro-batch, hatched = recomputation where any.</p>\n";
    for (const auto& m : s.methods) {
        o << "<h3>" << to_string(m.kind) << "</h3>\n";
        if (!m.chart) {
            o << "<p>Infeasible: " << xml(m.reason) << "</p>\n";
            continue;
        }
        schedule::svg_options so;
        so.width_px = 1500;
        so.row_height_px = 22;
        so.memory_limit_mb = s.memory_limit_mb;
        std::ostringstream g;
        const schedule::simulation_result with_memory = schedule::simulate(m.chart->scenario, m.chart->schedule);
        schedule::write_svg(g, with_memory, m.chart->schedule, so);
        o << g.str();
    }
}

inline void settings_table(std::ostringstream& o, const compare_report& rep) {
    o << "<h2>Every setting</h2>\n<table>\n<tr><th>max seqlen</th><th>tokens</th><th>method</th><th>tokens/s</th><th>samples/s</th>"
         "<th>iteration ms</th><th>efficiency</th><th>peak / limit MB</th><th>makespan / LB</th><th>planning ms</th>"
         "<th>speedup</th><th>configuration</th></tr>\n";
    char buf[512];
    for (const auto& s : rep.settings)
        for (const auto& m : s.methods) {
            std::snprintf(buf, sizeof buf, "<tr><td>%d</td><td>%lld</td><td>%s</td>", s.point.max_seqlen_tokens, s.point.tokens,
                          std::string(to_string(m.kind)).c_str());
            o << buf;
            if (!m.feasible) {
                o << "<td colspan=\"9\">infeasible: " << xml(m.reason) << "</td></tr>\n";
                continue;
            }
            std::snprintf(buf, sizeof buf,
                          "<td>%.0f</td><td>%.1f</td><td>%.1f</td><td>%.3f</td><td>%.0f / %.0f</td><td>%.3f</td><td>%.2f</td>"
                          "<td>%.2f×</td>",
                          m.tokens_per_s, m.samples_per_s, m.mean_iteration_ms, m.efficiency, m.max_peak_memory_mb,
                          s.memory_limit_mb, m.makespan_over_lower_bound, m.mean_planning_ms, m.speedup_over_best_baseline);
            o << buf << "<td>" << xml(describe_config(m)) << "</td></tr>\n";
        }
    o << "</table>\n";
}

}  // namespace detail

/// The whole report as one HTML page (see the file comment).
[[nodiscard]] inline std::string to_html(const compare_report& rep, const html_options& h) {
    std::ostringstream o;
    o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << detail::xml(h.title)
      << "</title>\n<style>body{font-family:Helvetica,Arial,sans-serif;margin:24px;max-width:1560px}"
         "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
         "td:last-child{text-align:left}.row{display:flex;flex-wrap:wrap;gap:16px}</style></head><body>\n";
    o << "<h1>" << detail::xml(h.title) << "</h1>\n<p>" << detail::xml(h.description) << "</p>\n<p>" << rep.iterations
      << " global batches per setting, seed " << rep.seed
      << (rep.gpus > 0 ? ", parallelism searched over tp × pp × dp = " + std::to_string(rep.gpus) : std::string())
      << ". Times are simulated from the cost model (pipeplan's event simulator), not measured.</p>\n";
    const std::string x_label = "max sequence length (tokens)";
    o << "<div class=\"row\"><div>";
    detail::method_charts(o, rep, x_label);
    o << "</div><div>";
    detail::ablation_chart(o, rep, x_label);
    detail::planning_chart(o, rep);
    o << "</div></div>\n<div class=\"row\"><div>";
    detail::error_chart(o, h);
    o << "</div></div>\n";
    detail::settings_table(o, rep);
    detail::gantt_charts(o, rep, h);
    o << "</body></html>\n";
    return o.str();
}

}  // namespace pipeplan::compare
