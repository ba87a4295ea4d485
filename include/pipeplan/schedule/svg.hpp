// pipeplan/schedule/svg.hpp — an SVG Gantt chart of a simulation, readable at a glance.
//
// Layout: a title line (schedule, makespan, lower bound, ratio); one row per device with its
// ops as boxes on a common time axis in ms; below it the memory-over-time curve of every
// device (MB, one colour per device, dashed line at the memory limit if given); a legend.
// Colours: each micro-batch has its own hue (golden-angle spacing); forwards are light,
// backwards dark, weight-gradient W darker still, checkpointed forwards f light with a dashed
// outline, recomputations R light with diagonal stripes. Boxes wide enough carry their op
// string (F3, B3.1); every box has a tooltip with stage and times.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/trace.hpp"

namespace pipeplan::schedule {

struct svg_options {
    double width_px = 1200.0;
    double row_height_px = 26.0;
    double memory_height_px = 170.0;
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< drawn when finite
    /// When set, the fill colour (any SVG colour) of each op box instead of the micro-batch
    /// hue, e.g. by GPU frequency (energy/); `colour_legend` then replaces "colour =
    /// micro-batch" in the legend (plain text).
    std::function<std::string(const op_timing&)> op_fill{};
    std::string colour_legend{};
};

namespace detail {
inline std::string fmt(double x, int prec = 1) {
    char b[48];
    std::snprintf(b, sizeof b, "%.*f", prec, x);
    return b;
}
/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over span.
inline double nice_step(double span, double target) {
    if (!(span > 0.0)) return 1.0;
    const double raw = span / target, p = std::pow(10.0, std::floor(std::log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}
/// The number of whole steps in [0, span] (plus a little slack), at most 1000.
inline int tick_count(double span, double step) {
    if (!(step > 0.0) || !std::isfinite(span / step)) return 0;
    return static_cast<int>(std::min(1000.0, std::floor(span / step + 1e-9)));
}
inline double hue_of(std::uint32_t mb) { return std::fmod(static_cast<double>(mb) * 137.508, 360.0); }
inline std::string xml_escape(std::string_view in) {
    std::string o;
    for (char c : in) {
        switch (c) {
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '&': o += "&amp;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}
inline const char* device_colour(std::size_t d) {
    static const char* const c[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                    "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};
    return c[d % 10];
}
}  // namespace detail

/// Writes the chart of `r` (needs the timeline; the memory panel needs the memory curve).
inline void write_svg(std::ostream& out, const simulation_result& r, const pipeline_schedule& s,
                      const svg_options& o = {}) {
    require_finite(r);  // nothing non-finite is drawn (and the tick loops below stay bounded)
    using detail::fmt;
    const std::size_t D = r.timeline.size();
    const double left = 92.0, right = 24.0, top = 46.0, gap = 4.0;
    const double plot_w = std::max(100.0, o.width_px - left - right);
    const double span = r.makespan_ms > 0.0 ? r.makespan_ms : 1.0;
    auto x = [&](double t) { return left + t / span * plot_w; };
    const double gantt_h = static_cast<double>(D) * (o.row_height_px + gap);
    const double axis_y = top + gantt_h + 2.0;
    const double mem_top = axis_y + 44.0, mem_h = o.memory_height_px;
    const double legend_y = mem_top + mem_h + 40.0;
    const double height = legend_y + 30.0;

    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(o.width_px, 0) << "\" height=\""
        << fmt(height, 0) << "\" viewBox=\"0 0 " << fmt(o.width_px, 0) << ' ' << fmt(height, 0)
        << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
    out << "<defs><pattern id=\"stripes\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
           "patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#000\" fill-opacity=\"0.28\"/>"
           "</pattern></defs>\n";
    out << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    out << "<text x=\"" << fmt(left, 0) << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
        << detail::xml_escape(s.name) << " — makespan " << fmt(r.makespan_ms, 2) << " ms";
    if (r.lower_bound_ms > 0.0)
        out << ", lower bound " << fmt(r.lower_bound_ms, 2) << " ms (×" << fmt(r.makespan_over_lower_bound, 3) << ")";
    out << "</text>\n";

    // Time grid and axis.
    const double step = detail::nice_step(span, 10.0);
    out << "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
    // Ticks are counted, not accumulated: a float sum could stall and never reach the end.
    const int ticks = detail::tick_count(span, step);
    for (int i = 0; i <= ticks; ++i)
        out << "<line x1=\"" << fmt(x(i * step)) << "\" y1=\"" << fmt(top - 4) << "\" x2=\"" << fmt(x(i * step)) << "\" y2=\""
            << fmt(mem_top + mem_h) << "\"/>\n";
    out << "</g>\n<g text-anchor=\"middle\" fill=\"#333\">\n";
    for (int i = 0; i <= ticks; ++i)
        out << "<text x=\"" << fmt(x(i * step)) << "\" y=\"" << fmt(axis_y + 14) << "\">" << fmt(i * step, step < 1.0 ? 2 : 0)
            << "</text>\n";
    out << "<text x=\"" << fmt(left + plot_w / 2) << "\" y=\"" << fmt(axis_y + 30) << "\">time (ms)</text>\n</g>\n";

    // Gantt rows.
    for (std::size_t d = 0; d < D; ++d) {
        const double y = top + static_cast<double>(d) * (o.row_height_px + gap);
        out << "<text x=\"" << fmt(left - 8) << "\" y=\"" << fmt(y + o.row_height_px / 2 + 4)
            << "\" text-anchor=\"end\" font-weight=\"bold\">device " << d << "</text>\n";
        out << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(plot_w) << "\" height=\""
            << fmt(o.row_height_px) << "\" fill=\"#f6f6f6\"/>\n";
        for (const op_timing& t : r.timeline[d]) {
            const double h = detail::hue_of(t.o.mb);
            double light = 66.0;
            bool dark = false;
            switch (t.o.kind) {
                case op_kind::B: light = 36.0; dark = true; break;
                case op_kind::W: light = 24.0; dark = true; break;
                default: break;
            }
            const double x0 = x(t.start_ms), w = std::max(0.5, x(t.end_ms) - x0);
            const std::string label = op_label(s, t.o);
            out << "<g><title>" << label << " (stage " << t.o.stage << "): " << fmt(t.start_ms, 3) << " – "
                << fmt(t.end_ms, 3) << " ms</title><rect x=\"" << fmt(x0, 2) << "\" y=\"" << fmt(y + 1) << "\" width=\""
                << fmt(w, 2) << "\" height=\"" << fmt(o.row_height_px - 2) << "\" fill=\""
                << (o.op_fill ? detail::xml_escape(o.op_fill(t)) : "hsl(" + fmt(h, 0) + ",70%," + fmt(light, 0) + "%)")
                << "\" stroke=\"#222\" stroke-width=\"0.6\"";
            if (t.o.kind == op_kind::f) out << " stroke-dasharray=\"3,2\"";
            out << "/>";
            if (t.o.kind == op_kind::R)
                out << "<rect x=\"" << fmt(x0, 2) << "\" y=\"" << fmt(y + 1) << "\" width=\"" << fmt(w, 2)
                    << "\" height=\"" << fmt(o.row_height_px - 2) << "\" fill=\"url(#stripes)\"/>";
            if (w >= 7.0 * static_cast<double>(label.size()))
                out << "<text x=\"" << fmt(x0 + w / 2, 2) << "\" y=\"" << fmt(y + o.row_height_px / 2 + 4)
                    << "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" << (dark ? "#fff" : "#111") << "\">"
                    << label << "</text>";
            out << "</g>\n";
        }
    }
    out << "<line x1=\"" << fmt(left) << "\" y1=\"" << fmt(axis_y) << "\" x2=\"" << fmt(left + plot_w) << "\" y2=\""
        << fmt(axis_y) << "\" stroke=\"#333\"/>\n";

    // Memory panel.
    double mem_max = 0.0;
    for (const auto& c : r.memory_mb)
        for (const auto& p : c) mem_max = std::max(mem_max, p.memory_mb);
    if (std::isfinite(o.memory_limit_mb)) mem_max = std::max(mem_max, o.memory_limit_mb);
    if (mem_max <= 0.0) mem_max = 1.0;
    const double mstep = detail::nice_step(mem_max, 4.0);
    double mtop = std::ceil(mem_max / mstep) * mstep;
    if (!std::isfinite(mtop)) mtop = mem_max;
    auto my = [&](double m) { return mem_top + mem_h - m / mtop * mem_h; };
    out << "<text x=\"" << fmt(left) << "\" y=\"" << fmt(mem_top - 8) << "\" font-weight=\"bold\">memory per device (MB)</text>\n";
    out << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(mem_top) << "\" width=\"" << fmt(plot_w) << "\" height=\""
        << fmt(mem_h) << "\" fill=\"none\" stroke=\"#999\"/>\n";
    for (int i = 0, n = detail::tick_count(mtop, mstep); i <= n; ++i) {
        const double m = i * mstep;
        out << "<text x=\"" << fmt(left - 6) << "\" y=\"" << fmt(my(m) + 4) << "\" text-anchor=\"end\" fill=\"#333\">"
            << fmt(m, 0) << "</text><line x1=\"" << fmt(left) << "\" y1=\"" << fmt(my(m)) << "\" x2=\"" << fmt(left + plot_w)
            << "\" y2=\"" << fmt(my(m)) << "\" stroke=\"#eee\"/>\n";
    }
    if (std::isfinite(o.memory_limit_mb))
        out << "<line x1=\"" << fmt(left) << "\" y1=\"" << fmt(my(o.memory_limit_mb)) << "\" x2=\"" << fmt(left + plot_w)
            << "\" y2=\"" << fmt(my(o.memory_limit_mb)) << "\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/><text x=\""
            << fmt(left + plot_w - 4) << "\" y=\"" << fmt(my(o.memory_limit_mb) - 4)
            << "\" text-anchor=\"end\" fill=\"#c00\">limit " << fmt(o.memory_limit_mb, 0) << " MB</text>\n";
    for (std::size_t d = 0; d < r.memory_mb.size(); ++d) {
        const auto& c = r.memory_mb[d];
        if (c.empty()) continue;
        out << "<path fill=\"none\" stroke=\"" << detail::device_colour(d) << "\" stroke-width=\"1.5\" d=\"M"
            << fmt(x(c[0].time_ms), 2) << ',' << fmt(my(c[0].memory_mb), 2);
        double prev_y = my(c[0].memory_mb);
        for (std::size_t i = 1; i < c.size(); ++i) {
            const double yy = my(c[i].memory_mb);
            out << " H" << fmt(x(c[i].time_ms), 2);
            if (yy != prev_y) out << " V" << fmt(yy, 2);
            prev_y = yy;
        }
        out << " H" << fmt(x(span), 2) << "\"/>\n";
    }

    // Legend.
    double lx = left;
    auto swatch = [&](const char* fill, const char* extra, const std::string& text) {
        out << "<rect x=\"" << fmt(lx) << "\" y=\"" << fmt(legend_y - 10) << "\" width=\"22\" height=\"12\" fill=\"" << fill
            << "\" stroke=\"#222\" stroke-width=\"0.6\"" << extra << "/>";
        out << "<text x=\"" << fmt(lx + 27) << "\" y=\"" << fmt(legend_y) << "\">" << text << "</text>\n";
        lx += 34.0 + 6.5 * static_cast<double>(text.size());
    };
    swatch("hsl(200,70%,66%)", "", "F forward");
    swatch("hsl(200,70%,36%)", "", "B backward");
    swatch("hsl(200,70%,24%)", "", "W weight grad");
    swatch("hsl(200,70%,66%)", " stroke-dasharray=\"3,2\"", "f checkpointed fwd");
    out << "<rect x=\"" << fmt(lx) << "\" y=\"" << fmt(legend_y - 10)
        << "\" width=\"22\" height=\"12\" fill=\"url(#stripes)\"/>";
    swatch("none", "", "R recompute");
    out << "<text x=\"" << fmt(lx) << "\" y=\"" << fmt(legend_y) << "\" fill=\"#555\">"
        << (o.colour_legend.empty() ? std::string("colour = micro-batch") : detail::xml_escape(o.colour_legend)) << ";";
    for (std::size_t d = 0; d < r.memory_mb.size() && d < 10; ++d)
        out << " <tspan fill=\"" << detail::device_colour(d) << "\">■ dev " << d << "</tspan>";
    out << "</text>\n</svg>\n";
}

}  // namespace pipeplan::schedule
