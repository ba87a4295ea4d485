// pipeplan/schedule/svg.hpp — an SVG Gantt chart of a simulation, readable at a glance.
//
// Layout: a title line (schedule, makespan, lower bound, ratio); one row per device with its
// ops as boxes on a common time axis in ms (several pipelines, e.g. data-parallel replicas:
// one labelled group of rows each); below it the memory-over-time curve of every device (MB,
// one colour per device, one dash style per replica, dashed red line at the memory limit if
// given; the axis reaches the limit); a legend whose swatches are drawn as the boxes are.
// The op kind never depends on colour alone: forwards F are plain, backwards B carry
// horizontal lines, weight-gradient W a cross-hatch, checkpointed forwards f a dashed outline,
// recomputations R diagonal stripes, and every box at least 8 px wide carries its kind letter
// (its whole op string, F3 or B3.1, when that fits). Colours: each micro-batch has its own hue
// (golden-angle spacing), forwards light, backwards dark, W darker; or the caller's op_fill
// (energy/: the GPU clock). The width grows with the ops (svg_options::width_px = 0): the
// median op is min_op_px wide (up to max_width_px), so a long schedule scrolls instead of
// hiding its labels. Every box has a tooltip with stage and times.
// The two parts of an overlapped forward/backward pair share their time span: the forward fills
// the upper half of the row, the backward the lower half.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/trace.hpp"

namespace pipeplan::schedule {

struct svg_options {
    double width_px = 0.0;         ///< total width; 0 = automatic (min_op_px per median op)
    double min_op_px = 30.0;       ///< automatic width: the median op's box width
    double min_width_px = 1200.0;  ///< automatic width: bounds
    double max_width_px = 24000.0;
    double row_height_px = 26.0;
    double memory_height_px = 170.0;
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< drawn when finite
    /// > 0: the title's makespan / lower bound instead of the simulations' (e.g. the planner's
    /// figures over every replica, so that the chart and the summary agree).
    double makespan_ms = 0.0;
    double lower_bound_ms = 0.0;
    /// When set, the fill colour (any SVG colour) of each op box instead of the micro-batch
    /// hue, e.g. by GPU frequency (energy/); `colour_legend` (plain text) and `colour_scale`
    /// (swatches: colour, text) then replace "colour = micro-batch" in the legend.
    std::function<std::string(const op_timing&)> op_fill{};
    std::string colour_legend{};
    std::vector<std::pair<std::string, std::string>> colour_scale{};
};

/// One pipeline of a chart: its simulation (timeline; memory curve for the memory panel), its
/// schedule and, with several pipelines, the group's label (e.g. "replica 1").
struct svg_pipeline {
    const simulation_result* sim = nullptr;
    const pipeline_schedule* schedule = nullptr;
    std::string label{};
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

namespace detail {

/// Where everything goes: margins, the plot's width and time scale, rows and panels.
struct svg_layout {
    double left = 118.0, right = 24.0, top = 46.0, gap = 4.0, group_head = 20.0;
    double plot_w = 0.0, span_ms = 1.0, width = 0.0;
    std::vector<double> group_top;  ///< [g] y of group g's first row
    double axis_y = 0.0, mem_top = 0.0, mem_h = 0.0, legend_y = 0.0, height = 0.0;
    [[nodiscard]] double x(double t_ms) const { return left + t_ms / span_ms * plot_w; }
};

/// The median op duration over every pipeline (0 when there are no ops).
inline double median_op_ms(std::span<const svg_pipeline> ps) {
    std::vector<double> d;
    for (const auto& p : ps)
        for (const auto& row : p.sim->timeline)
            for (const auto& t : row)
                if (t.end_ms > t.start_ms) d.push_back(t.end_ms - t.start_ms);
    if (d.empty()) return 0.0;
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
    return d[d.size() / 2];
}

inline svg_layout layout_svg(std::span<const svg_pipeline> ps, const svg_options& o) {
    svg_layout L;
    L.span_ms = 0.0;
    for (const auto& p : ps) L.span_ms = std::max(L.span_ms, p.sim->makespan_ms);
    if (!(L.span_ms > 0.0)) L.span_ms = 1.0;
    const double margins = L.left + L.right;
    if (o.width_px > 0.0) {
        L.plot_w = std::max(100.0, o.width_px - margins);
    } else {
        const double med = median_op_ms(ps);
        const double want = med > 0.0 ? o.min_op_px * L.span_ms / med : 0.0;
        L.plot_w = std::clamp(want, std::max(100.0, o.min_width_px - margins), std::max(100.0, o.max_width_px - margins));
    }
    L.width = L.plot_w + margins;
    const bool labelled = ps.size() > 1;
    double y = L.top;
    for (const auto& p : ps) {
        if (labelled) y += L.group_head;
        L.group_top.push_back(y);
        y += static_cast<double>(p.sim->timeline.size()) * (o.row_height_px + L.gap) + (labelled ? 6.0 : 0.0);
    }
    L.axis_y = y + 2.0;
    L.mem_top = L.axis_y + 44.0;
    L.mem_h = o.memory_height_px;
    L.legend_y = L.mem_top + L.mem_h + 40.0;
    L.height = L.legend_y + 48.0;
    return L;
}

/// The pattern that marks an op kind (besides colour), or nullptr (forwards: plain).
inline const char* kind_pattern(op_kind k) {
    switch (k) {
        case op_kind::B: return "url(#pp-hlines)";
        case op_kind::W: return "url(#pp-cross)";
        case op_kind::R: return "url(#pp-stripes)";
        default: return nullptr;
    }
}

inline void svg_defs(std::ostream& out) {
    out << "<defs><pattern id=\"pp-stripes\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
           "patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#000\" fill-opacity=\"0.3\"/></pattern>"
           "<pattern id=\"pp-hlines\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\"><rect width=\"4\" "
           "height=\"1.3\" fill=\"#fff\" fill-opacity=\"0.6\"/></pattern>"
           "<pattern id=\"pp-cross\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\"><path d=\"M0,0 L6,6 M6,0 "
           "L0,6\" stroke=\"#fff\" stroke-opacity=\"0.7\" stroke-width=\"1.2\"/></pattern></defs>\n";
}

/// One op box: fill, the kind's pattern and outline, the op string or its kind letter, tooltip.
inline void svg_op_box(std::ostream& out, const svg_layout& L, double y, double h, const op_timing& t,
                       const pipeline_schedule& s, const svg_options& o) {
    const bool dark = !o.op_fill && (t.o.kind == op_kind::B || t.o.kind == op_kind::W);
    const double light = t.o.kind == op_kind::B ? 36.0 : t.o.kind == op_kind::W ? 24.0 : 66.0;
    const std::string fill =
        o.op_fill ? xml_escape(o.op_fill(t)) : "hsl(" + fmt(hue_of(t.o.microbatch), 0) + ",70%," + fmt(light, 0) + "%)";
    const double x0 = L.x(t.start_ms), w = std::max(0.5, L.x(t.end_ms) - x0);
    const std::string label = op_label(s, t.o);
    out << "<g><title>" << label << " (stage " << t.o.stage << "): " << fmt(t.start_ms, 3) << " – " << fmt(t.end_ms, 3)
        << " ms</title><rect x=\"" << fmt(x0, 2) << "\" y=\"" << fmt(y + 1) << "\" width=\"" << fmt(w, 2) << "\" height=\""
        << fmt(h - 2) << "\" fill=\"" << fill << "\" stroke=\"#222\" stroke-width=\"0.6\"";
    if (t.o.kind == op_kind::F_checkpoint) out << " stroke-dasharray=\"3,2\"";
    out << "/>";
    if (const char* pat = kind_pattern(t.o.kind)) {  // R: the whole box; B, W: a band under the text
        const double band = t.o.kind == op_kind::R ? h - 2 : std::min(7.0, (h - 2) / 3);
        out << "<rect x=\"" << fmt(x0, 2) << "\" y=\"" << fmt(y + h - 1 - band) << "\" width=\"" << fmt(w, 2)
            << "\" height=\"" << fmt(band) << "\" fill=\"" << pat << "\"/>";
    }
    const std::string text = w >= 7.0 * static_cast<double>(label.size()) ? label
                             : w >= 8.0                                   ? label.substr(0, 1)
                                                                          : std::string();
    if (!text.empty())
        out << "<text x=\"" << fmt(x0 + w / 2, 2) << "\" y=\"" << fmt(y + h / 2 + 4)
            << "\" text-anchor=\"middle\" font-size=\"10\" font-weight=\"bold\" fill=\"" << (dark ? "#fff" : "#111")
            << "\">" << text << "</text>";
    out << "</g>\n";
}

/// Title, time grid and axis labels.
inline void svg_title_and_grid(std::ostream& out, const svg_layout& L, std::span<const svg_pipeline> ps,
                               const svg_options& o) {
    double makespan = 0.0, lower = 0.0;
    for (const auto& p : ps) {
        makespan = std::max(makespan, p.sim->makespan_ms);
        lower = std::max(lower, p.sim->lower_bound_ms);
    }
    if (o.makespan_ms > 0.0) makespan = o.makespan_ms;
    if (o.lower_bound_ms > 0.0) lower = o.lower_bound_ms;
    out << "<text x=\"" << fmt(L.left, 0) << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
        << xml_escape(ps.front().schedule->name) << " — makespan " << fmt(makespan, 2) << " ms";
    if (lower > 0.0) out << ", lower bound " << fmt(lower, 2) << " ms (×" << fmt(makespan / lower, 3) << ")";
    if (ps.size() > 1) out << "; " << ps.size() << " pipelines";
    out << "</text>\n";
    const double step = nice_step(L.span_ms, std::max(10.0, L.plot_w / 110.0));
    const int ticks = tick_count(L.span_ms, step);  // counted, not accumulated: a float sum could stall
    out << "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
    for (int i = 0; i <= ticks; ++i)
        out << "<line x1=\"" << fmt(L.x(i * step)) << "\" y1=\"" << fmt(L.top - 4) << "\" x2=\"" << fmt(L.x(i * step))
            << "\" y2=\"" << fmt(L.mem_top + L.mem_h) << "\"/>\n";
    out << "</g>\n<g text-anchor=\"middle\" fill=\"#333\">\n";
    for (int i = 0; i <= ticks; ++i)
        out << "<text x=\"" << fmt(L.x(i * step)) << "\" y=\"" << fmt(L.axis_y + 14) << "\">"
            << fmt(i * step, step < 1.0 ? 2 : 0) << "</text>\n";
    out << "<text x=\"" << fmt(L.left + std::min(L.plot_w, 1000.0) / 2) << "\" y=\"" << fmt(L.axis_y + 30)
        << "\">time (ms)</text>\n</g>\n";
    out << "<line x1=\"" << fmt(L.left) << "\" y1=\"" << fmt(L.axis_y) << "\" x2=\"" << fmt(L.left + L.plot_w) << "\" y2=\""
        << fmt(L.axis_y) << "\" stroke=\"#333\"/>\n";
}

/// Each pipeline's rows (with several: a labelled, outlined group each).
inline void svg_rows(std::ostream& out, const svg_layout& L, std::span<const svg_pipeline> ps, const svg_options& o) {
    for (std::size_t g = 0; g < ps.size(); ++g) {
        const simulation_result& r = *ps[g].sim;
        const std::size_t D = r.timeline.size();
        if (ps.size() > 1) {
            const double y0 = L.group_top[g] - L.group_head, h = L.group_head + static_cast<double>(D) * (o.row_height_px + L.gap) + 2.0;
            out << "<rect x=\"4\" y=\"" << fmt(y0) << "\" width=\"" << fmt(L.left + L.plot_w + 8) << "\" height=\""
                << fmt(h) << "\" fill=\"none\" stroke=\"#888\" stroke-dasharray=\"4,3\"/>\n<text x=\"10\" y=\""
                << fmt(y0 + 14) << "\" font-weight=\"bold\">" << xml_escape(ps[g].label) << " — makespan "
                << fmt(r.makespan_ms, 2) << " ms</text>\n";
        }
        for (std::size_t d = 0; d < D; ++d) {
            const double y = L.group_top[g] + static_cast<double>(d) * (o.row_height_px + L.gap);
            out << "<text x=\"" << fmt(L.left - 8) << "\" y=\"" << fmt(y + o.row_height_px / 2 + 4)
                << "\" text-anchor=\"end\" font-weight=\"bold\">device " << d << "</text>\n<rect x=\"" << fmt(L.left)
                << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(L.plot_w) << "\" height=\"" << fmt(o.row_height_px)
                << "\" fill=\"#f6f6f6\"/>\n";
            const auto& row = r.timeline[d];
            for (std::size_t k = 0; k < row.size(); ++k) {  // an overlapped pair: forward above, backward below
                const bool tail = k > 0 && row[k - 1].o.overlaps_next, pair = tail || row[k].o.overlaps_next;
                const double h = pair ? o.row_height_px / 2 : o.row_height_px;
                svg_op_box(out, L, tail ? y + h : y, h, row[k], *ps[g].schedule, o);
            }
        }
    }
}

/// The dash style of pipeline g's memory curves (none for the first).
inline const char* pipeline_dash(std::size_t g) {
    static const char* const dash[] = {"", "7,3", "2,2", "9,3,2,3"};
    return dash[g < 4 ? g : 1 + (g - 1) % 3];
}

/// Memory per device over time, every pipeline, with the limit line; the axis reaches the limit.
inline void svg_memory(std::ostream& out, const svg_layout& L, std::span<const svg_pipeline> ps, const svg_options& o) {
    double mem_max = 0.0;
    for (const auto& p : ps)
        for (const auto& c : p.sim->memory_mb)
            for (const auto& pt : c) mem_max = std::max(mem_max, pt.memory_mb);
    const bool limit = std::isfinite(o.memory_limit_mb);
    if (limit) mem_max = std::max(mem_max, o.memory_limit_mb);
    if (mem_max <= 0.0) mem_max = 1.0;
    const double mstep = nice_step(mem_max, 4.0);
    double mtop = std::ceil(mem_max * 1.0001 / mstep) * mstep;
    if (!std::isfinite(mtop) || mtop <= 0.0) mtop = mem_max;
    auto my = [&](double m) { return L.mem_top + L.mem_h - m / mtop * L.mem_h; };
    std::string drawn;  // with several pipelines of which some have no memory curve: the ones drawn
    bool missing = false;
    for (const auto& p : ps) {
        if (p.sim->memory_mb.empty()) missing = true;
        else drawn += (drawn.empty() ? "" : ", ") + p.label;
    }
    out << "<text x=\"" << fmt(L.left) << "\" y=\"" << fmt(L.mem_top - 8) << "\" font-weight=\"bold\">memory per device (MB)"
        << (missing && !drawn.empty() ? " of " + xml_escape(drawn) : std::string()) << "</text>\n";
    out << "<rect x=\"" << fmt(L.left) << "\" y=\"" << fmt(L.mem_top) << "\" width=\"" << fmt(L.plot_w) << "\" height=\""
        << fmt(L.mem_h) << "\" fill=\"none\" stroke=\"#999\"/>\n";
    for (int i = 0, n = tick_count(mtop, mstep); i <= n; ++i)
        out << "<text x=\"" << fmt(L.left - 6) << "\" y=\"" << fmt(my(i * mstep) + 4) << "\" text-anchor=\"end\" fill=\"#333\">"
            << fmt(i * mstep, 0) << "</text><line x1=\"" << fmt(L.left) << "\" y1=\"" << fmt(my(i * mstep)) << "\" x2=\""
            << fmt(L.left + L.plot_w) << "\" y2=\"" << fmt(my(i * mstep)) << "\" stroke=\"#eee\"/>\n";
    if (limit)
        out << "<line x1=\"" << fmt(L.left) << "\" y1=\"" << fmt(my(o.memory_limit_mb)) << "\" x2=\"" << fmt(L.left + L.plot_w)
            << "\" y2=\"" << fmt(my(o.memory_limit_mb)) << "\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>"
            << "<text x=\"" << fmt(L.left + 4) << "\" y=\"" << fmt(my(o.memory_limit_mb) - 4)
            << "\" fill=\"#c00\">device memory limit " << fmt(o.memory_limit_mb, 0) << " MB</text>\n";
    for (std::size_t g = 0; g < ps.size(); ++g)
        for (std::size_t d = 0; d < ps[g].sim->memory_mb.size(); ++d) {
            const auto& c = ps[g].sim->memory_mb[d];
            if (c.empty()) continue;
            out << "<path fill=\"none\" stroke=\"" << device_colour(d) << "\" stroke-width=\"1.5\"";
            if (*pipeline_dash(g)) out << " stroke-dasharray=\"" << pipeline_dash(g) << '"';
            out << " d=\"M" << fmt(L.x(c[0].time_ms), 2) << ',' << fmt(my(c[0].memory_mb), 2);
            double prev_y = my(c[0].memory_mb);
            for (std::size_t i = 1; i < c.size(); ++i) {
                const double yy = my(c[i].memory_mb);
                out << " H" << fmt(L.x(c[i].time_ms), 2);
                if (yy != prev_y) out << " V" << fmt(yy, 2);
                prev_y = yy;
            }
            out << " H" << fmt(L.x(ps[g].sim->makespan_ms), 2) << "\"/>\n";
        }
}

/// The legend: op kinds drawn as the boxes are (neutral grey, so no hue reads as a kind), then
/// what colour means, the devices' curve colours and, with several pipelines, their dashes.
inline void svg_legend(std::ostream& out, const svg_layout& L, std::span<const svg_pipeline> ps, const svg_options& o) {
    double lx = L.left, ly = L.legend_y;
    auto swatch = [&](const std::string& fill, const char* pattern, const char* extra, const std::string& text) {
        out << "<rect x=\"" << fmt(lx) << "\" y=\"" << fmt(ly - 10) << "\" width=\"22\" height=\"12\" fill=\"" << fill
            << "\" stroke=\"#222\" stroke-width=\"0.6\"" << extra << "/>";
        if (pattern)  // as on the boxes: stripes over the whole swatch, the B and W patterns as a band
            out << "<rect x=\"" << fmt(lx) << "\" y=\"" << fmt(std::string_view(pattern) == "url(#pp-stripes)" ? ly - 10 : ly - 5)
                << "\" width=\"22\" height=\"" << (std::string_view(pattern) == "url(#pp-stripes)" ? 12 : 7) << "\" fill=\""
                << pattern << "\"/>";
        out << "<text x=\"" << fmt(lx + 27) << "\" y=\"" << fmt(ly) << "\">" << xml_escape(text) << "</text>\n";
        lx += 34.0 + 6.5 * static_cast<double>(text.size());
    };
    swatch("#c8c8c8", nullptr, "", "F forward");
    swatch("#6e6e6e", kind_pattern(op_kind::B), "", "B backward");
    swatch("#4a4a4a", kind_pattern(op_kind::W), "", "W weight grad");
    swatch("#c8c8c8", nullptr, " stroke-dasharray=\"3,2\"", "f checkpointed fwd");
    swatch("#c8c8c8", kind_pattern(op_kind::R), "", "R recompute");
    lx = L.left;
    ly += 22.0;
    if (!o.colour_scale.empty()) {
        for (const auto& [colour, text] : o.colour_scale) swatch(colour, nullptr, "", text);
    }
    out << "<text x=\"" << fmt(lx) << "\" y=\"" << fmt(ly) << "\" fill=\"#555\">"
        << (o.colour_legend.empty() ? std::string("colour = micro-batch (light F, dark B, darker W)")
                                    : xml_escape(o.colour_legend))
        << "; memory curves:";
    for (std::size_t d = 0; d < ps.front().sim->memory_mb.size() && d < 10; ++d)
        out << " <tspan fill=\"" << device_colour(d) << "\">■ dev " << d << "</tspan>";
    out << "</text>\n";
    lx = L.left;
    ly += 22.0;
    for (std::size_t g = 0; ps.size() > 1 && g < ps.size() && g < 4; ++g) {  // each drawn pipeline's curve style
        if (ps[g].sim->memory_mb.empty()) continue;
        out << "<line x1=\"" << fmt(lx) << "\" y1=\"" << fmt(ly - 4) << "\" x2=\"" << fmt(lx + 22) << "\" y2=\""
            << fmt(ly - 4) << "\" stroke=\"#333\" stroke-width=\"1.5\"";
        if (*pipeline_dash(g)) out << " stroke-dasharray=\"" << pipeline_dash(g) << '"';
        out << "/><text x=\"" << fmt(lx + 27) << "\" y=\"" << fmt(ly) << "\">memory of " << xml_escape(ps[g].label) << "</text>\n";
        lx += 44.0 + 6.5 * static_cast<double>(ps[g].label.size() + 10);
    }
}

}  // namespace detail

/// Writes the chart of one or more pipelines (each needs its timeline; the memory panel its
/// memory curve), e.g. every data-parallel replica of a plan, one labelled group of rows each.
inline void write_svg(std::ostream& out, std::span<const svg_pipeline> ps, const svg_options& o = {}) {
    if (ps.empty()) throw invalid_argument("write_svg: no pipeline to draw");
    for (const auto& p : ps) {
        if (!p.sim || !p.schedule) throw invalid_argument("write_svg: a pipeline without its simulation or schedule");
        require_finite(*p.sim);  // nothing non-finite is drawn (and the tick loops stay bounded)
    }
    const detail::svg_layout L = detail::layout_svg(ps, o);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << detail::fmt(L.width, 0) << "\" height=\""
        << detail::fmt(L.height, 0) << "\" viewBox=\"0 0 " << detail::fmt(L.width, 0) << ' ' << detail::fmt(L.height, 0)
        << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
    detail::svg_defs(out);
    out << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    detail::svg_title_and_grid(out, L, ps, o);
    detail::svg_rows(out, L, ps, o);
    detail::svg_memory(out, L, ps, o);
    detail::svg_legend(out, L, ps, o);
    out << "</svg>\n";
}

/// Writes the chart of `r` (needs the timeline; the memory panel needs the memory curve).
inline void write_svg(std::ostream& out, const simulation_result& r, const pipeline_schedule& s,
                      const svg_options& o = {}) {
    const svg_pipeline one{&r, &s, {}};
    write_svg(out, std::span<const svg_pipeline>(&one, 1), o);
}

}  // namespace pipeplan::schedule
