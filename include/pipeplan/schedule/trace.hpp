// pipeplan/schedule/trace.hpp — Chrome / Perfetto trace of a simulation (Trace Event JSON).
//
// Open the file in chrome://tracing or https://ui.perfetto.dev: one process "pipeline", one
// thread per device, a complete ("X") event per op named like the CLI's op strings (F3, B3.1),
// with category forward/backward/weight/recompute and args {mb, stage}; plus a counter track
// "memory device d" (MB) per device. Times are in microseconds as the format requires.
// Written without a JSON library.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::schedule {

/// A number as Chrome trace files carry it: the shortest text that reads back exactly.
inline std::string trace_number(double x) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, r.ptr);
}
/// The text of a JSON/XML string value with `"`, `\\`, `<`, `>`, `&` and control characters escaped.
inline std::string trace_escape(std::string_view in) {
    std::string o;
    for (char c : in) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '<': o += "\\u003c"; break;
            case '>': o += "\\u003e"; break;
            case '&': o += "\\u0026"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                    o += b;
                } else {
                    o += c;
                }
        }
    }
    return o;
}

namespace detail {
inline const char* category(op_kind k) {
    switch (k) {
        case op_kind::F: return "forward";
        case op_kind::F_checkpoint: return "forward-checkpointed";
        case op_kind::B: return "backward";
        case op_kind::W: return "weight";
        case op_kind::R: return "recompute";
    }
    return "?";
}
}  // namespace detail

/// Throws pipeplan::error when any figure of `r` is not finite (times that sum past the range of
/// a double): such a result is never printed, traced or drawn.
inline void require_finite(const simulation_result& r) {
    const auto bad = [](double x) { return !std::isfinite(x); };
    const auto fail = [](const std::string& what) {
        throw error("the simulation produced a non-finite " + what +
                    ": the scenario's times or memory sum beyond the range of a double");
    };
    if (bad(r.makespan_ms)) fail("makespan");
    if (bad(r.lower_bound_ms) || bad(r.makespan_over_lower_bound)) fail("lower bound");
    for (const auto* v : {&r.busy_ms, &r.bubble_fraction, &r.peak_memory_mb, &r.final_memory_mb})
        for (const double x : *v)
            if (bad(x)) fail("per-device figure (busy time, bubble or memory)");
    for (const auto& dev : r.timeline)
        for (const op_timing& t : dev)
            if (bad(t.start_ms) || bad(t.end_ms)) fail("op start or end time");
    for (const auto& dev : r.memory_mb)
        for (const memory_point& p : dev)
            if (bad(p.time_ms) || bad(p.memory_mb)) fail("point of the memory curve");
}

/// Writes the trace of `r` (which must hold the timeline; the memory curve is optional).
/// Throws pipeplan::error (before writing anything) when a figure is not finite.
/// `extra_args`, when set, returns JSON members (`"key":value`, comma-separated, no braces)
/// appended to each op's args, e.g. its GPU frequency (energy/).
inline void write_chrome_trace(std::ostream& out, const simulation_result& r, const pipeline_schedule& s,
                               const std::function<std::string(const op_timing&)>& extra_args = {}) {
    require_finite(r);
    // The trace counts microseconds: every time must stay finite after scaling.
    double latest_ms = r.makespan_ms;
    for (const auto& dev : r.memory_mb)
        for (const memory_point& p : dev) latest_ms = std::max(latest_ms, p.time_ms);
    if (!std::isfinite(latest_ms * 1000.0))
        throw error("the simulation's times (up to " + std::to_string(latest_ms) +
                    " ms) are too large for a trace in microseconds");
    const auto num = trace_number;
    out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    out << R"({"name":"process_name","ph":"M","pid":0,"args":{"name":"pipeline )" << trace_escape(s.name) << "\"}}";
    for (std::size_t d = 0; d < r.timeline.size(); ++d)
        out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << d << ",\"args\":{\"name\":\"device "
            << d << "\"}}";
    for (std::size_t d = 0; d < r.timeline.size(); ++d)
        for (const op_timing& t : r.timeline[d]) {
            out << ",\n{\"name\":\"" << op_label(s, t.o) << "\",\"cat\":\"" << detail::category(t.o.kind)
                << "\",\"ph\":\"X\",\"pid\":0,\"tid\":" << d << ",\"ts\":" << num(t.start_ms * 1000.0)
                << ",\"dur\":" << num((t.end_ms - t.start_ms) * 1000.0) << ",\"args\":{\"mb\":" << t.o.microbatch
                << ",\"stage\":" << t.o.stage;
            if (extra_args) {
                const std::string extra = extra_args(t);
                if (!extra.empty()) out << ',' << extra;
            }
            out << "}}";
        }
    for (std::size_t d = 0; d < r.memory_mb.size(); ++d)
        for (const memory_point& p : r.memory_mb[d])
            out << ",\n{\"name\":\"memory device " << d << "\",\"ph\":\"C\",\"pid\":0,\"ts\":" << num(p.time_ms * 1000.0)
                << ",\"args\":{\"MB\":" << num(p.memory_mb) << "}}";
    out << "\n]}\n";
}

}  // namespace pipeplan::schedule
