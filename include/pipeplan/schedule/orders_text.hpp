// pipeplan/schedule/orders_text.hpp — device orders as text, for researchers' own schedules
// (`pipeplan simulate --orders FILE`).
//
// Format: one device per line, in device order; ops separated by spaces or tabs, spelled as
// the CLI prints them (op.hpp): `F3`, `f3`, `R3`, `B3`, `W3`, with a chunk `F3.1` (chunk 1 of
// the device; virtual stage = the placement's stage_of(device, chunk); no suffix = chunk 0).
// An overlapped forward/backward pair (op::overlaps_next) is one token, the forward, `&`, the B
// of another micro-batch it overlaps: `F3.1&B5.0` (two positions; generator.hpp's
// order_labels() writes it so, and the pair is priced at the schedule's overlap_factor).
// Lines that are empty or start with `#` are skipped (they are not devices).
// Errors (pipeplan::input_error) name the file, the line and `device d, position p, op X`:
// an unknown op, a micro-batch or chunk out of range, an op given twice, a missing op (named
// at the end of its device's line), W ops in a file without a B/W split for every backward,
// R without an f, and ops of one stage ordered against their dependencies on the same device
// (B before its forward, R before its f or after its B, W before its B). Misorders across
// devices are found by the simulator (schedule_deadlock); orders_text::line_of_device maps
// its device back to the file line.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/generator.hpp"

namespace pipeplan::schedule {

/// The parsed file: the schedule (name "orders") and, per device, its line in the file.
struct orders_text {
    pipeline_schedule schedule;
    std::vector<std::size_t> line_of_device;
};

namespace detail {

/// Per (kind, stage, micro-batch): the device position of the op, or -1.
struct order_positions {
    std::size_t M = 0;
    std::vector<std::int64_t> at[5];  // by op_kind value
    void reset(std::size_t V, std::size_t mbs) {
        M = mbs;
        for (auto& a : at) a.assign(V * mbs, -1);
    }
    std::int64_t& of(op_kind k, std::size_t stage, std::size_t mb) { return at[static_cast<int>(k)][stage * M + mb]; }
};

/// Same-device dependency checks of one op already recorded in `pos` (see the file comment).
inline const char* same_device_misorder(order_positions& pos, const op& o) {
    const std::int64_t fwd = std::max(pos.of(op_kind::F, o.stage, o.microbatch), pos.of(op_kind::F_checkpoint, o.stage, o.microbatch));
    const std::int64_t r = pos.of(op_kind::R, o.stage, o.microbatch), b = pos.of(op_kind::B, o.stage, o.microbatch),
                       w = pos.of(op_kind::W, o.stage, o.microbatch);
    switch (o.kind) {
        case op_kind::R:
            if (fwd < 0) return "R before its forward f on this device";
            if (pos.of(op_kind::F_checkpoint, o.stage, o.microbatch) < 0) return "R of a forward that was not checkpointed (f)";
            if (b >= 0 && b < r) return "R after its B";
            break;
        case op_kind::B:
            if (fwd < 0 || fwd > b) return "B before its forward on this device";
            break;
        case op_kind::W:
            if (b < 0 || b > w) return "W before its B";
            break;
        default: break;
    }
    return nullptr;
}

/// Appends the op(s) of token `tok` (one op, or an overlapped pair `F3&B5`) of device d to
/// `orders`; throws input_error at `where` for anything else.
inline void append_token(std::string_view tok, std::size_t d, const scenario& sc, const stage_placement& pl,
                         const std::string& source, std::size_t line, const std::string& where, std::vector<op>& orders) {
    const auto one = [&](std::string_view part) {
        const auto parsed = parse_op(part);
        if (!parsed) throw input_error(source, line, where, "not an op (expected e.g. F3, f3, R3, B3, W3, F3.1 or F3&B1)");
        if (parsed->microbatch >= sc.microbatches)
            throw input_error(source, line, where,
                              "micro-batch out of range (the scenario has " + std::to_string(sc.microbatches) + ")");
        if (parsed->chunk >= pl.chunks())
            throw input_error(source, line, where,
                              "chunk out of range (the placement has " + std::to_string(pl.chunks()) + " per device)");
        return op{parsed->kind, parsed->microbatch, static_cast<std::uint32_t>(pl.stage_of(d, parsed->chunk))};
    };
    const std::size_t amp = tok.find('&');
    if (amp == std::string_view::npos) {
        orders.push_back(one(tok));
        return;
    }
    op f = one(tok.substr(0, amp));
    const op b = one(tok.substr(amp + 1));
    if (!is_forward(f.kind) || b.kind != op_kind::B || b.microbatch == f.microbatch)
        throw input_error(source, line, where,
                          "an overlapped pair is a forward & the B of another micro-batch (e.g. F3&B1)");
    f.overlaps_next = true;
    orders.push_back(f);
    orders.push_back(b);
}

}  // namespace detail

/// The checks of the file comment on a parsed file (all ops present once, same-device order).
inline void check_orders_text(orders_text& t, const std::string& source, std::size_t M) {
    pipeline_schedule& s = t.schedule;
    const std::size_t V = s.placement.virtual_stages();
    bool any_w = false;
    for (const auto& dev : s.orders)
        for (const op& o : dev) any_w = any_w || o.kind == op_kind::W;
    if (any_w) s.w_share = 0.5;  // a B/W split: B and W take half of the backward each
    detail::order_positions pos;
    pos.reset(V, M);
    for (std::size_t d = 0; d < s.orders.size(); ++d) {
        const std::size_t line = t.line_of_device[d];
        for (std::size_t p = 0; p < s.orders[d].size(); ++p) {
            const op o = s.orders[d][p];
            const std::string where = "device " + std::to_string(d) + ", position " + std::to_string(p) + ", op " +
                                      op_label(s, o);
            const bool fwd = is_forward(o.kind);
            if (pos.of(o.kind, o.stage, o.microbatch) >= 0 ||
                (fwd && pos.of(o.kind == op_kind::F ? op_kind::F_checkpoint : op_kind::F, o.stage, o.microbatch) >= 0))
                throw input_error(source, line, where, "appears twice");
            pos.of(o.kind, o.stage, o.microbatch) = static_cast<std::int64_t>(p);
            if (const char* why = detail::same_device_misorder(pos, o)) throw input_error(source, line, where, why);
        }
    }
    for (std::size_t d = 0; d < s.orders.size(); ++d)
        for (std::size_t c = 0; c < s.placement.chunks(); ++c) {
            const std::size_t v = s.placement.stage_of(d, c);
            for (std::uint32_t j = 0; j < M; ++j) {
                auto missing = [&](op_kind k) {
                    throw input_error(source, t.line_of_device[d],
                                      "device " + std::to_string(d) + ", position " + std::to_string(s.orders[d].size()) +
                                          ", op " + op_label(s, {k, j, static_cast<std::uint32_t>(v)}),
                                      "missing (every micro-batch needs a forward and a B on every stage" +
                                          std::string(any_w ? ", and a W" : "") + ")");
                };
                if (pos.of(op_kind::F, v, j) < 0 && pos.of(op_kind::F_checkpoint, v, j) < 0) missing(op_kind::F);
                if (pos.of(op_kind::B, v, j) < 0) missing(op_kind::B);
                if (any_w && pos.of(op_kind::W, v, j) < 0) missing(op_kind::W);
            }
        }
}

/// Parses device orders for `sc` placed by `pl` (see the file comment); `source` names the
/// text in errors.
[[nodiscard]] inline orders_text parse_orders_text(std::string_view text, const std::string& source,
                                                   const scenario& sc, const stage_placement& pl) {
    const std::size_t V = sc.stages, M = sc.microbatches, D = pl.devices();
    if (pl.virtual_stages() != V)
        throw invalid_argument("parse_orders_text: the placement has " + std::to_string(pl.virtual_stages()) +
                               " virtual stages, the scenario " + std::to_string(V));
    orders_text out;
    out.schedule.name = "orders";
    out.schedule.placement = pl;
    std::size_t line = 0;
    for (std::size_t b = 0; b <= text.size();) {
        std::size_t e = text.find('\n', b);
        if (e == std::string_view::npos) e = text.size();
        std::string_view l = text.substr(b, e - b);
        b = e + 1;
        ++line;
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        const std::size_t first = l.find_first_not_of(" \t");
        if (first == std::string_view::npos || l[first] == '#') {
            if (e == text.size()) break;
            continue;
        }
        const std::size_t d = out.schedule.orders.size();
        if (d >= D)
            throw input_error(source, line, "device " + std::to_string(d),
                              "more device lines than the " + std::to_string(D) + " devices of the placement");
        out.schedule.orders.emplace_back();
        out.line_of_device.push_back(line);
        for (std::size_t p = first; p < l.size();) {
            const std::size_t q = std::min(l.find_first_of(" \t", p), l.size());
            const std::string_view tok = l.substr(p, q - p);
            const std::size_t position = out.schedule.orders[d].size();
            const std::string where = "device " + std::to_string(d) + ", position " + std::to_string(position) + ", op " +
                                      std::string(tok);
            detail::append_token(tok, d, sc, pl, source, line, where, out.schedule.orders[d]);
            p = l.find_first_not_of(" \t", q);
            if (p == std::string_view::npos) break;
        }
        if (e == text.size()) break;
    }
    if (out.schedule.orders.size() != D)
        throw input_error(source, line, "", "has " + std::to_string(out.schedule.orders.size()) +
                                                " device lines, the placement has " + std::to_string(D) + " devices");
    check_orders_text(out, source, M);
    return out;
}

}  // namespace pipeplan::schedule
