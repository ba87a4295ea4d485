// pipeplan/schedule/registry.hpp — named schedules: one traits row per schedule, open to users.
//
// Every fact a consumer needs about a named schedule stands in its row (schedule_traits): the
// generator factory, whether it plans under a memory limit, whether its micro-batch order (and
// in-flight limit) may be searched, how it places chunks, whether it splits backwards, how it
// spreads a checkpoint ratio. The planner, the CLI's simulate and energy commands and the CPU
// runtime read the row, never the name, so a user's schedule works everywhere once registered:
//
//   pipeplan::schedule::schedule_traits row;
//   row.name = "my-1f1b";
//   row.factory = [](const pipeplan::schedule::named_schedule_options&) { return my_generator{}; };
//   pipeplan::schedule::register_schedule(std::move(row));   // then plan with it by name
//
// The built-in schedules are the rows of builtin_schedules(); schedule_name names them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/core/names.hpp"
#include "pipeplan/schedule/adaptive.hpp"
#include "pipeplan/schedule/dualpipe_v.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/gpipe.hpp"
#include "pipeplan/schedule/interleaved.hpp"
#include "pipeplan/schedule/merak.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"
#include "pipeplan/schedule/order_search.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/zero_bubble.hpp"
#include "pipeplan/schedule/zero_bubble_v.hpp"

namespace pipeplan::schedule {

/// The built-in schedules (their rows: builtin_schedules()).
enum class schedule_name : std::uint8_t {
    gpipe, one_f_one_b, interleaved, adaptive, zb_h1, merak_early, merak_last, merak_critical, zb_v, v_half, v_min, dualpipe_v
};

[[nodiscard]] constexpr auto enum_names(schedule_name) noexcept {
    return name_table<schedule_name, 12>{"schedule",
                                        {{{schedule_name::gpipe, "gpipe"},
                                          {schedule_name::one_f_one_b, "1f1b"},
                                          {schedule_name::interleaved, "interleaved"},
                                          {schedule_name::adaptive, "adaptive"},
                                          {schedule_name::zb_h1, "zb-h1"},
                                          {schedule_name::merak_early, "merak-early"},
                                          {schedule_name::merak_last, "merak-last"},
                                          {schedule_name::merak_critical, "merak-critical"},
                                          {schedule_name::zb_v, "zb-v"},
                                          {schedule_name::v_half, "v-half"},
                                          {schedule_name::v_min, "v-min"},
                                          {schedule_name::dualpipe_v, "dualpipe-v"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(schedule_name n) noexcept { return name_of(n); }

/// Parses a built-in schedule's name; throws pipeplan::invalid_argument listing the choices.
[[nodiscard]] inline schedule_name parse_schedule_name(std::string_view s) { return parse_name<schedule_name>(s); }

/// Options of the named schedules (each uses the ones that concern it).
struct named_schedule_options {
    /// Model chunks per device (interleaved; adaptive on a placed scenario). 0 = the scenario's
    /// placement, or 2 for interleaved on a scenario without one. prepare_scenario() sets it.
    std::size_t chunks = 0;
    placement_kind placement = placement_kind::linear;  ///< set by prepare_scenario() (adaptive)
    /// Merak's activation_checkpoint_ratio r (merak-* only; NaN = none: the scenario's ratios).
    double checkpoint_ratio = std::numeric_limits<double>::quiet_NaN();
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< adaptive, zb-h1
    std::size_t inflight_limit = 0;  ///< adaptive (0 = none)
    double w_share = 0.5;     ///< zb-h1, zb-v, v-half, v-min
    /// zb-v, v-half, v-min: pending weight gradients after which a device runs a W first (0 = W
    /// only fills waits).
    std::size_t max_pending_w = 0;
    /// dualpipe-v: prices an overlapped forward/backward as max(F, B) + overlap_factor·min(F, B)
    /// (timing.hpp). 1 (no overlap benefit) unless measured: how much a forward and a backward
    /// of two micro-batches hide each other depends on the model and the kernels.
    double overlap_factor = 1.0;
    /// For inner loops of searches: adaptive tries uniform preferences only, zb-v / v-half / v-min
    /// one preference and no table.
    bool quick = false;
    /// With `quick`, zb-v / v-half / v-min: stop once the makespan is sure to exceed this (the
    /// order search's makespan to beat; zb_v::give_up_above_ms).
    double give_up_above_ms = std::numeric_limits<double>::infinity();
};

/// A type-erased generator (models schedule_generator).
using any_generator = std::function<pipeline_schedule(const scenario&)>;

/// How a schedule runs the virtual stages of a scenario (prepare_scenario()).
enum class chunk_rule : std::uint8_t {
    /// One stage per device; a scenario placing C > 1 chunks per device is an error.
    one_stage_per_device,
    /// Several chunks per device: a placed scenario runs as placed (an interleaved placement),
    /// any other is split into named_schedule_options::chunks (default 2) chunks per stage.
    splits_into_chunks,
    /// A placed scenario runs as placed (any placement), any other one stage per device.
    runs_placed,
};

/// The facts of one named schedule: its row in the registry, read by every consumer.
struct schedule_traits {
    std::string name;  ///< as the CLI and the plan header spell it
    /// The generator of prepared options (prepare_scenario()'s); it runs on the prepared scenario.
    std::function<any_generator(const named_schedule_options&)> factory;
    /// The generator keeps to named_schedule_options::memory_limit_mb; a fixed-order schedule
    /// (false) is only checked against a limit after simulation.
    bool plans_under_memory_limit = false;
    /// Its micro-batch order may be searched (search_order_with); false: the order is the
    /// scenario's, as for schedules that fix it themselves.
    bool searchable_order = true;
    /// The order search also varies named_schedule_options::inflight_limit.
    bool searches_inflight_limit = false;
    chunk_rule chunks = chunk_rule::one_stage_per_device;
    /// splits_into_chunks: how the chunks are placed — interleaved (any number of chunks), or
    /// v_shape (two chunks per device, split_into_v_chunks()).
    placement_kind split_placement = placement_kind::interleaved;
    /// Its schedules split every backward into B and W ops (pipeline_schedule::w_share > 0).
    bool splits_backward = false;
    /// The rule that spreads named_schedule_options::checkpoint_ratio over the stages
    /// (merak_checkpoint_ratios); nullopt: a checkpoint ratio is an error for it. A row whose
    /// schedules run f ops (checkpointing forwards) sets it: the planner's memory bound
    /// (memory_bound.hpp) counts a forward's stored activations as held otherwise.
    std::optional<merak_variant> checkpoint_rule;
    /// The planner tries it when no schedule is named (plan/planner.hpp), on the configurations
    /// its chunk rule runs on, in increasing rank (ties: registration order; the earlier wins
    /// ties of makespan). Negative: never a candidate.
    int candidate_rank = -1;
    /// Its schedules overlap one micro-batch's forward with another's backward (op::overlaps_next),
    /// priced by named_schedule_options::overlap_factor. Such a row is a planner candidate only
    /// when the planner's overlap factor is below 1 (a measured overlap): at 1 a pair saves nothing.
    bool overlaps_pairs = false;
};

/// The built-in rows, in schedule_name order.
[[nodiscard]] inline std::vector<schedule_traits> builtin_schedules() {
    const auto fixed = [](schedule_name n, auto make) {
        schedule_traits t;
        t.name = std::string(to_string(n));
        t.factory = [make](const named_schedule_options& o) -> any_generator { return make(o); };
        return t;
    };
    const auto merak_row = [&](schedule_name n, merak_variant v) {
        schedule_traits t = fixed(n, [v](const named_schedule_options&) { return merak{v}; });
        t.checkpoint_rule = v;
        return t;
    };
    std::vector<schedule_traits> rows;
    rows.push_back(fixed(schedule_name::gpipe, [](const named_schedule_options&) { return gpipe{}; }));
    rows.push_back(fixed(schedule_name::one_f_one_b, [](const named_schedule_options&) { return one_f_one_b{}; }));
    rows.back().candidate_rank = 1;
    rows.push_back(fixed(schedule_name::interleaved, [](const named_schedule_options& o) {
        return interleaved_1f1b{o.chunks == 0 ? 2 : o.chunks};
    }));
    rows.back().chunks = chunk_rule::splits_into_chunks;
    rows.back().candidate_rank = 1;
    rows.push_back(fixed(schedule_name::adaptive, [](const named_schedule_options& o) {
        adaptive a;
        a.memory_limit_mb = o.memory_limit_mb;
        a.inflight_limit = o.inflight_limit;
        a.search_preferences = !o.quick;
        a.placement = o.placement;
        a.chunks = std::max<std::size_t>(1, o.chunks);
        return a;
    }));
    rows.back().plans_under_memory_limit = true;
    rows.back().searches_inflight_limit = true;
    rows.back().chunks = chunk_rule::runs_placed;
    rows.back().candidate_rank = 0;
    rows.push_back(fixed(schedule_name::zb_h1, [](const named_schedule_options& o) {
        zb_h1 z;
        z.w_share = o.w_share;
        z.memory_limit_mb = o.memory_limit_mb;
        return z;
    }));
    rows.back().plans_under_memory_limit = true;
    rows.back().splits_backward = true;
    rows.back().candidate_rank = 2;
    rows.push_back(merak_row(schedule_name::merak_early, merak_variant::early_recompute));
    rows.push_back(merak_row(schedule_name::merak_last, merak_variant::last_stage_no_recompute));
    rows.push_back(merak_row(schedule_name::merak_critical, merak_variant::shifted_critical_path));
    const auto v_row = [&](schedule_name n, double share, int rank) {
        schedule_traits t = fixed(n, [n, share](const named_schedule_options& o) {
            zb_v z;
            z.name = std::string(to_string(n));
            z.activation_share = share;
            z.w_share = o.w_share;
            z.memory_limit_mb = o.memory_limit_mb;
            z.max_pending_w = o.max_pending_w;
            z.quick = o.quick;
            z.give_up_above_ms = o.give_up_above_ms;
            return z;
        });
        t.plans_under_memory_limit = true;
        t.splits_backward = true;
        t.chunks = chunk_rule::splits_into_chunks;
        t.split_placement = placement_kind::v_shape;
        t.candidate_rank = rank;
        return t;
    };
    rows.push_back(v_row(schedule_name::zb_v, 1.0, 3));
    rows.push_back(v_row(schedule_name::v_half, 0.5, 4));
    rows.push_back(v_row(schedule_name::v_min, 1.0 / 3.0, 5));
    // dualpipe-v: a candidate only under a measured overlap factor < 1 (overlaps_pairs).
    rows.push_back(v_row(schedule_name::dualpipe_v, 1.0, 6));
    rows.back().overlaps_pairs = true;
    rows.back().factory = [](const named_schedule_options& o) -> any_generator {
        dualpipe_v z;
        z.w_share = o.w_share;
        z.overlap_factor = o.overlap_factor;
        z.memory_limit_mb = o.memory_limit_mb;
        z.max_pending_w = o.max_pending_w;
        return z;
    };
    return rows;
}

/// Named schedules: the built-in rows and those users add. Rows are never removed or moved, so
/// a reference to one stays valid; lookups and additions may come from any thread.
class schedule_registry {
public:
    schedule_registry() {
        for (auto& row : builtin_schedules()) add(std::move(row));
    }
    schedule_registry(const schedule_registry&) = delete;
    schedule_registry& operator=(const schedule_registry&) = delete;

    /// Adds `row`; throws pipeplan::invalid_argument when its name is taken or not a portable
    /// name (core/names.hpp: what a plan file's header carries), or it has no factory.
    const schedule_traits& add(schedule_traits row) {
        if (!is_portable_name(row.name))
            throw invalid_argument("schedule registry: '" + row.name +
                                   "' is not a schedule name (1 to 64 characters of A-Z a-z 0-9 _ . + -)");
        if (!row.factory) throw invalid_argument("schedule registry: schedule '" + row.name + "' has no factory");
        std::unique_lock lock(mutex_);
        if (find_locked(row.name))
            throw invalid_argument("schedule registry: a schedule named '" + row.name + "' is registered already");
        return rows_.emplace_back(std::move(row));
    }

    /// The row named `name`, or nullptr.
    [[nodiscard]] const schedule_traits* find(std::string_view name) const {
        std::shared_lock lock(mutex_);
        return find_locked(name);
    }

    /// The row named `name`; throws pipeplan::invalid_argument "unknown schedule 'x' (valid: ...)".
    [[nodiscard]] const schedule_traits& at(std::string_view name) const {
        if (const schedule_traits* t = find(name)) return *t;
        throw invalid_argument("unknown schedule '" + std::string(name) + "' (valid: " + name_list() + ")");
    }

    /// The planner's candidate rows (candidate_rank >= 0), by rank, then registration order.
    [[nodiscard]] std::vector<const schedule_traits*> candidates() const {
        std::vector<const schedule_traits*> out;
        {
            std::shared_lock lock(mutex_);
            for (const auto& r : rows_)
                if (r.candidate_rank >= 0) out.push_back(&r);
        }
        std::stable_sort(out.begin(), out.end(),
                         [](const schedule_traits* a, const schedule_traits* b) { return a->candidate_rank < b->candidate_rank; });
        return out;
    }

    /// The names, in registration order (the built-ins first), joined by `sep`.
    [[nodiscard]] std::string name_list(std::string_view sep = ", ") const {
        std::shared_lock lock(mutex_);
        std::string out;
        for (const auto& r : rows_) out += (out.empty() ? "" : std::string(sep)) + r.name;
        return out;
    }

private:
    [[nodiscard]] const schedule_traits* find_locked(std::string_view name) const {
        for (const auto& r : rows_)
            if (r.name == name) return &r;
        return nullptr;
    }
    mutable std::shared_mutex mutex_;
    std::deque<schedule_traits> rows_;
};

/// The process's registry (the built-ins and what register_schedule() added).
[[nodiscard]] inline schedule_registry& schedules() {
    static schedule_registry r;
    return r;
}

/// Adds a user's schedule to schedules() (see schedule_registry::add()).
inline const schedule_traits& register_schedule(schedule_traits row) { return schedules().add(std::move(row)); }

/// The row of a built-in schedule.
[[nodiscard]] inline const schedule_traits& traits_of(schedule_name n) { return schedules().at(to_string(n)); }

/// Which schedule: a built-in or any registered one, by name. Converts from schedule_name.
class schedule_id {
public:
    schedule_id(schedule_name n) : name_(to_string(n)) {}  // NOLINT: a built-in is a schedule_id
    explicit schedule_id(std::string name) : name_(std::move(name)) {}

    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    /// Its row (throws pipeplan::invalid_argument when no schedule has that name).
    [[nodiscard]] const schedule_traits& traits() const { return schedules().at(name_); }

    friend bool operator==(const schedule_id&, const schedule_id&) = default;

private:
    std::string name_;
};

/// The generator of schedule `t`. The scenario it expects is prepare_scenario()'s result.
[[nodiscard]] inline any_generator make_generator(const schedule_traits& t, const named_schedule_options& o) {
    return t.factory(o);
}
[[nodiscard]] inline any_generator make_generator(schedule_name n, const named_schedule_options& o) {
    return make_generator(traits_of(n), o);
}

/// Whether schedule `t` places two chunks per device as a V (the V schedules).
[[nodiscard]] inline bool places_v(const schedule_traits& t) noexcept {
    return t.chunks == chunk_rule::splits_into_chunks && t.split_placement == placement_kind::v_shape;
}

/// Whether `chunks` model chunks per device (as a user gives them, the planner's
/// pipeline_config::virtual_chunks) suit schedule `t`: 1 always; more for the rows that run
/// several chunks, but exactly 2 for a V.
[[nodiscard]] inline bool accepts_chunks(const schedule_traits& t, std::size_t chunks) noexcept {
    if (chunks <= 1) return true;
    if (t.chunks == chunk_rule::one_stage_per_device) return false;
    return !places_v(t) || chunks == 2;
}

/// Whether `n` is a Merak variant (its row spreads a checkpoint ratio).
[[nodiscard]] inline bool is_merak(schedule_name n) { return traits_of(n).checkpoint_rule.has_value(); }

namespace detail {

/// `o` completed for a scenario whose placement `placed` has C > 1 chunks per device (the
/// scenario runs as placed); throws when `t`'s chunk rule or `o.chunks` contradicts it.
inline void run_as_placed(const schedule_traits& t, const scenario& sc, const stage_placement& placed,
                          named_schedule_options& o) {
    const std::string where = "the scenario places its " + std::to_string(sc.stages) + " stages on " +
                              std::to_string(placed.devices()) + " devices (" + std::to_string(placed.chunks()) +
                              " chunks per device, " + std::string(to_string(placed.kind())) + ")";
    if (o.chunks != 0 && o.chunks != placed.chunks())
        throw option_error("chunks", "{} " + std::to_string(o.chunks) + " contradicts the scenario: " + where);
    if (t.chunks == chunk_rule::splits_into_chunks && placed.kind() != t.split_placement)
        throw invalid_argument("schedule '" + t.name + "' needs a" +
                               (t.split_placement == placement_kind::interleaved ? "n " : " ") +
                               std::string(to_string(t.split_placement)) + " placement; " + where);
    if (t.split_placement == placement_kind::v_shape && placed.chunks() != 2)
        throw invalid_argument("schedule '" + t.name + "' places two chunks per device; " + where);
    if (t.chunks == chunk_rule::one_stage_per_device)
        throw invalid_argument("schedule '" + t.name + "' runs one stage per device; " + where +
                               " (use interleaved or adaptive)");
    o.chunks = placed.chunks();
    o.placement = placed.kind();
}

}  // namespace detail

/// The scenario schedule `t` runs on, and `o` completed for its factory:
/// - a scenario whose placement (`devices`, `placement`) has C > 1 chunks per device is run as
///   placed by the schedules that run chunks (chunk_rule); `o.chunks` must be 0 or C, and the
///   schedules that run one stage per device are an error;
/// - otherwise a schedule that splits into chunks splits every stage into o.chunks (default 2)
///   equal chunks (split_into_chunks); the scenario is used as it is for the others;
/// - `o.checkpoint_ratio` (only for rows with a checkpoint rule, else an error) sets the
///   scenario's per-stage ratios by that rule (merak_checkpoint_ratios()).
/// Throws pipeplan::invalid_argument naming the contradiction.
[[nodiscard]] inline scenario prepare_scenario(const schedule_traits& t, const scenario& sc, named_schedule_options& o) {
    const bool ratio = !std::isnan(o.checkpoint_ratio);
    if (ratio && !t.checkpoint_rule)
        throw invalid_argument("a checkpoint ratio applies to the merak-* schedules only, not to '" + t.name + "'");
    const stage_placement placed = placement_of(sc);
    scenario out;
    if (placed.chunks() > 1) {
        detail::run_as_placed(t, sc, placed, o);
        out = sc;
    } else if (t.chunks == chunk_rule::splits_into_chunks && t.split_placement == placement_kind::v_shape) {
        if (o.chunks != 0 && o.chunks != 2)
            throw option_error("chunks", "{} " + std::to_string(o.chunks) + ": schedule '" + t.name +
                                             "' places two chunks per device (a V)");
        o.chunks = 2;
        o.placement = placement_kind::v_shape;
        out = split_into_v_chunks(sc);
    } else if (t.chunks == chunk_rule::splits_into_chunks) {
        if (o.chunks == 0) o.chunks = 2;
        out = split_into_chunks(sc, o.chunks);
        o.placement = o.chunks > 1 ? placement_kind::interleaved : placement_kind::linear;
    } else {
        o.chunks = 1;
        o.placement = placement_kind::linear;
        out = sc;
    }
    if (ratio) out.checkpoint_ratio = merak_checkpoint_ratios(out.stages, o.checkpoint_ratio, *t.checkpoint_rule);
    return out;
}
[[nodiscard]] inline scenario prepare_scenario(schedule_name n, const scenario& sc, named_schedule_options& o) {
    return prepare_scenario(traits_of(n), sc, o);
}

/// Searches the micro-batch order of schedule `t` on `sc` (prepared) with options `o`: the
/// search's generators are `t`'s quick ones (uniform preferences), with the in-flight limit
/// varied when the row searches it. A row whose order is not searchable keeps the scenario's
/// order (one evaluation, feasible when it fits so.memory_limit_mb).
[[nodiscard]] inline order_search_result search_named_order(const schedule_traits& t, const scenario& sc,
                                                            const named_schedule_options& o, order_search_options so) {
    so.search_inflight_limit = t.searches_inflight_limit;
    if (!t.searchable_order) {
        so.max_evaluations = 1;
        so.start.resize(sc.microbatches);
        std::iota(so.start.begin(), so.start.end(), 0u);
    }
    // A generator may give up above the makespan to beat only when its replay facts settle the
    // evaluation (its memory limit within the search's).
    const bool give_up = o.memory_limit_mb <= so.memory_limit_mb;
    return search_order_with(
        sc,
        [&](std::size_t limit, double beat_ms) {
            named_schedule_options q = o;
            q.inflight_limit = limit;
            q.quick = true;  // the schedule in the chosen order runs the full search (schedule_in_order)
            if (give_up) q.give_up_above_ms = beat_ms;
            return make_generator(t, q);
        },
        so);
}

/// A named schedule run in a micro-batch order.
struct ordered_schedule {
    scenario sc;                       ///< the scenario reordered (sc's micro-batch i = the input's order[i])
    std::vector<std::uint32_t> order;  ///< relative to the input scenario
    pipeline_schedule sched;
    simulation_result sim;
};

/// Schedule `t` on `sc` in micro-batch order `order` (o.inflight_limit: the search's choice),
/// generated in full (o.quick is ignored) and simulated into the result with `simo` and `ws`.
[[nodiscard]] inline ordered_schedule schedule_in_order(const schedule_traits& t, const scenario& sc,
                                                        named_schedule_options o, std::vector<std::uint32_t> order,
                                                        const simulation_options& simo, simulation_workspace& ws) {
    ordered_schedule out;
    out.sc = reorder(sc, order);
    out.order = std::move(order);
    o.quick = false;
    o.give_up_above_ms = std::numeric_limits<double>::infinity();
    out.sched = make_generator(t, o)(out.sc);
    simulate_into(out.sim, out.sc, out.sched, simo, ws);
    return out;
}

}  // namespace pipeplan::schedule
