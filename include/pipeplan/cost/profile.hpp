// pipeplan/cost/profile.hpp — the profile cost model: per-layer times and activation memory
// measured on real hardware (pipeplan's profile CSV format, docs/formats.md), interpolated over
// (mbs, s[, d]).
//
//   auto m = pipeplan::profile_cost_model::load("../shared/data/cost_models", "gpt_6.7b");
//   pipeplan::layer_cost c = m.evaluate({.comp = pipeplan::component::encoder, .mbs = 3,
//                                        .seqlen_tokens = 600, .tp = 2});
//   double fwd_ms = c.forward_ms.value_or(-1);   // status says out of range / unsupported
//
// Repeated measurements of one configuration are aggregated by their median, except in
// interpolation_mode::dynapipe, which takes their maximum as DynaPipe's profile reader does (it
// keeps every repeat in a sorted list and its interpolation grid keeps the last entry per mbs).
// Both aggregations are built at load, so with_mode() switches between them. Each
// (tp, recompute, component, metric) is a dense profile_grid (profile_grid.hpp, which also
// documents the interpolation, below-grid, above-grid and ragged-grid policies). Metrics with
// no data (e.g. activation memory of the LM head, anything of the embedding, an unprofiled tp)
// are estimate::unsupported().
//
// A loaded model is immutable: all queries are const, allocation-free and thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/core/csv.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/profile_grid.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan {

/// How repeated measurements of one profiled configuration become one grid value.
enum class repeat_aggregation : std::uint8_t { median = 0, maximum = 1 };

/// The aggregation a mode uses: DynaPipe's maximum in interpolation_mode::dynapipe, else the
/// median (the better estimate of a noisy measurement).
[[nodiscard]] constexpr repeat_aggregation aggregation_of(interpolation_mode m) noexcept {
    return m == interpolation_mode::dynapipe ? repeat_aggregation::maximum : repeat_aggregation::median;
}

class profile_cost_model {
public:
    /// Loads `<dir>/<model_name>_timing.csv`, `_activation.csv` and `_model_state.csv`.
    /// Throws invalid_argument when `dir` is not a directory or has no `<model_name>_timing.csv`
    /// (the message lists the models found in `dir`), input_error for unreadable or malformed
    /// files (file, line, column).
    [[nodiscard]] static profile_cost_model load(const std::filesystem::path& dir, std::string_view model_name,
                                                 interpolation_mode mode = interpolation_mode::recommended) {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::is_directory(dir, ec))
            throw invalid_argument("profile directory '" + dir.string() + "' does not exist");
        const std::string name(model_name);
        const fs::path timing = dir / (name + "_timing.csv");
        if (!name.empty() && fs::exists(timing, ec) && !fs::is_regular_file(timing, ec))
            throw input_error(timing.string(), 0, "", "is not a regular file (a profile is three CSV files)");
        if (name.empty() || !fs::is_regular_file(timing, ec)) {
            const auto models = available_models(dir);
            std::string list;
            for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
            throw invalid_argument("unknown profiled model '" + name + "' in '" + dir.string() +
                                   "' (valid: " + (list.empty() ? std::string("none found") : list) + ")");
        }
        // Read in a fixed order so that the first bad file is the one reported.
        const csv_table timing_table = csv_table::read(timing);
        const csv_table activation_table = csv_table::read(dir / (name + "_activation.csv"));
        const csv_table state_table = csv_table::read(dir / (name + "_model_state.csv"));
        profile_cost_model m = from_csv(timing_table, activation_table, state_table, mode, name);
        for (const csv_table* t : {&timing_table, &activation_table, &state_table})
            if (t->rows() == 0) throw input_error(t->source(), 0, "", "no data rows (the file has only a header)");
        m.check_embedding_rows(state_table.source());
        return m;
    }

    /// The model names (file prefixes of `<name>_timing.csv`) in `dir`, sorted.
    [[nodiscard]] static std::vector<std::string> available_models(const std::filesystem::path& dir) {
        std::vector<std::string> out;
        std::error_code ec;
        constexpr std::string_view suffix = "_timing.csv";
        for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
            const std::string f = e.path().filename().string();
            if (f.size() > suffix.size() && f.ends_with(suffix))
                out.push_back(f.substr(0, f.size() - suffix.size()));
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    /// Builds a model from already-parsed tables (e.g. csv_table::parse of test strings).
    /// `timing`: tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms;
    /// `activation`: tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb;
    /// `model_state`: tp,recompute,component,memory_mb. Extra columns are ignored. Throws
    /// input_error naming file, line and column on any invalid cell; nothing is half-built.
    [[nodiscard]] static profile_cost_model from_csv(const csv_table& timing, const csv_table& activation,
                                                     const csv_table& model_state,
                                                     interpolation_mode mode = interpolation_mode::recommended,
                                                     std::string name = "profile") {
        std::vector<entry> entries;
        read_metric_table(timing, "phase", "time_ms", true, entries);
        read_metric_table(activation, "kind", "memory_mb", false, entries);
        std::vector<state_entry> states = read_model_state(model_state);

        profile_cost_model m;
        m.name_ = std::move(name);
        m.set_mode(mode);
        for (const auto& e : entries) m.tps_.push_back(e.tp);
        for (const auto& s : states) m.tps_.push_back(s.tp);
        std::sort(m.tps_.begin(), m.tps_.end());
        m.tps_.erase(std::unique(m.tps_.begin(), m.tps_.end()), m.tps_.end());
        m.grid_index_.assign(m.tps_.size() * grid_slots_per_tp, -1);
        m.parameter_mb_.assign(m.tps_.size() * state_slots_per_tp, std::numeric_limits<double>::quiet_NaN());
        m.build_grids(entries);
        m.build_states(states);
        return m;
    }

    /// Builds a model from CSV text (e.g. small synthetic profiles in tests). Error messages
    /// name the sources `<name>_timing.csv`, `<name>_activation.csv`, `<name>_model_state.csv`.
    [[nodiscard]] static profile_cost_model parse(std::string_view timing_csv, std::string_view activation_csv,
                                                  std::string_view model_state_csv,
                                                  interpolation_mode mode = interpolation_mode::recommended,
                                                  std::string name = "profile") {
        const csv_table timing = csv_table::parse(timing_csv, name + "_timing.csv");
        const csv_table activation = csv_table::parse(activation_csv, name + "_activation.csv");
        const csv_table state = csv_table::parse(model_state_csv, name + "_model_state.csv");
        return from_csv(timing, activation, state, mode, std::move(name));
    }

    /// The model's name (the file prefix when loaded from a directory).
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] interpolation_mode mode() const noexcept { return mode_; }
    /// How repeated measurements are aggregated in this mode (aggregation_of(mode())).
    [[nodiscard]] repeat_aggregation aggregation() const noexcept { return aggregation_; }
    /// A copy of the model (tables included) that interpolates with another mode.
    [[nodiscard]] profile_cost_model with_mode(interpolation_mode mode) const {
        profile_cost_model m = *this;
        m.set_mode(mode);
        return m;
    }
    /// Tensor-parallel degrees present in the profile, ascending.
    [[nodiscard]] const std::vector<int>& tp_degrees() const noexcept { return tps_; }
    /// True when the profile has decoder layers (an encoder-decoder model such as T5).
    [[nodiscard]] bool is_encoder_decoder() const noexcept { return encoder_decoder_; }

    /// Forward/backward time (ms) and stored/peak activation memory (MB) of one layer (or the
    /// LM head) for one micro-batch, interpolated with the model's mode.
    [[nodiscard]] layer_cost evaluate(const layer_query& q) const noexcept { return evaluate(q, scheme_); }

    /// As evaluate(q), with an explicit interpolation scheme.
    [[nodiscard]] layer_cost evaluate(const layer_query& q, interpolation_scheme scheme) const noexcept {
        layer_cost c;
        const int t = tp_slot(q.tp);
        if (t < 0 || static_cast<std::size_t>(q.recompute) >= recompute_modes ||
            static_cast<std::size_t>(q.comp) >= components)
            return c;  // all unsupported
        const std::size_t base =
            static_cast<std::size_t>(t) * grid_slots_per_tp +
            (static_cast<std::size_t>(q.recompute) * components + static_cast<std::size_t>(q.comp)) * metrics;
        if (shared_axes_[base / metrics]) {
            // The metrics' grids share their axes: search them once.
            std::array<const profile_grid*, metrics> grids{};
            std::array<estimate<double>*, metrics> slots{&c.forward_ms, &c.backward_ms, &c.stored_mb, &c.peak_mb};
            std::array<estimate<double>, metrics> results{};
            std::size_t count = 0;
            std::array<std::size_t, metrics> which{};
            for (std::size_t i = 0; i < metrics; ++i) {
                const int g = grid_index_[base + i];
                if (g < 0) continue;
                which[count] = i;
                grids[count++] = &grids_of_mode()[static_cast<std::size_t>(g)];
            }
            profile_grid::at_shared(grids.data(), count, q.mbs, q.seqlen_tokens, q.dec_seqlen_tokens, scheme,
                                    results.data());
            for (std::size_t i = 0; i < count; ++i) *slots[which[i]] = results[i];
            return c;
        }
        c.forward_ms = lookup(base + 0, q, scheme);
        c.backward_ms = lookup(base + 1, q, scheme);
        c.stored_mb = lookup(base + 2, q, scheme);
        c.peak_mb = lookup(base + 3, q, scheme);
        return c;
    }

    /// `q` with each length set to 0 that no grid of its (tp, recompute, component) has as an
    /// axis (an axis with the single value 0: profile_grid::independent()): those lengths are
    /// never located, so queries with the same canonical query are priced the same, bit for bit
    /// (canonical_cost_model). A query with no grid at all (e.g. the embedding's, which no
    /// profile times) is unsupported whatever its lengths: both are set to 0.
    [[nodiscard]] layer_query canonical_query(layer_query q) const noexcept {
        bool encoder_free = true, decoder_free = true;
        for (const cost_metric which : all_cost_metrics) {
            const profile_grid* g = grid(q.tp, q.recompute, q.comp, which);
            if (g == nullptr) continue;
            encoder_free = encoder_free && g->independent(1);
            decoder_free = decoder_free && g->independent(2);
        }
        if (encoder_free) q.seqlen_tokens = 0;
        if (decoder_free) q.dec_seqlen_tokens = 0;
        return q;
    }

    /// A query whose lengths are located once, to be priced at many micro-batch sizes
    /// (prepare(), evaluate(prepared, mbs)): the exact split prices rows of shapes (m, E, D).
    struct prepared_query {
        layer_query q;
        int slot = -1;  ///< (tp, recompute, component) group; -1: every metric unsupported
        bool shared = false;  ///< the metrics' grids share their axes (else evaluate(q) per size)
        bool all_metrics = false;  ///< every metric has a grid (which = 0, 1, 2, 3)
        std::size_t count = 0;
        std::array<std::size_t, all_cost_metrics.size()> which{};
        std::array<const profile_grid*, all_cost_metrics.size()> grids{};
        profile_grid::located_lengths lengths;
        /// The last mbs cell's corner values (evaluate(prepared, mbs) fills it): a prepared
        /// query is evaluated from one thread at a time.
        mutable profile_grid::mbs_cell_memo memo;
    };

    /// Prepares `q` (its mbs is ignored) for evaluate(prepared, mbs).
    void prepare(const layer_query& q, prepared_query& out) const noexcept {
        out.q = q;
        out.slot = -1;
        out.count = 0;
        out.all_metrics = false;
        out.memo = {};
        const int t = tp_slot(q.tp);
        if (t < 0 || static_cast<std::size_t>(q.recompute) >= recompute_modes ||
            static_cast<std::size_t>(q.comp) >= components)
            return;
        const std::size_t base =
            static_cast<std::size_t>(t) * grid_slots_per_tp +
            (static_cast<std::size_t>(q.recompute) * components + static_cast<std::size_t>(q.comp)) * metrics;
        out.slot = static_cast<int>(base / metrics);
        out.shared = shared_axes_[base / metrics] != 0;
        if (!out.shared) return;
        for (std::size_t i = 0; i < metrics; ++i) {
            const int g = grid_index_[base + i];
            if (g < 0) continue;
            out.which[out.count] = i;
            out.grids[out.count++] = &grids_of_mode()[static_cast<std::size_t>(g)];
        }
        out.all_metrics = out.count == metrics;
        if (out.count > 0) out.grids[0]->locate_lengths(q.seqlen_tokens, q.dec_seqlen_tokens, scheme_, out.lengths);
    }

    /// evaluate(q) of the prepared query with q.mbs = mbs, bit for bit.
    [[nodiscard]] layer_cost evaluate(const prepared_query& p, int mbs) const noexcept {
        if (p.slot < 0 || !p.shared) {
            layer_query q = p.q;
            q.mbs = mbs;
            return evaluate(q, scheme_);
        }
        std::array<estimate<double>, metrics> results;
        profile_grid::at_shared_located(p.grids.data(), p.count, mbs, p.lengths, scheme_, results.data(), &p.memo);
        if (p.all_metrics) return layer_cost{results[0], results[1], results[2], results[3]};
        layer_cost c;
        std::array<estimate<double>*, metrics> slots{&c.forward_ms, &c.backward_ms, &c.stored_mb, &c.peak_mb};
        for (std::size_t i = 0; i < p.count; ++i) *slots[p.which[i]] = results[i];
        return c;
    }

    /// evaluate(p, mbs) at mbs = first + k into out[k], k = 0 .. n − 1, bit for bit (the sizes
    /// inside one mbs cell are interpolated together: profile_grid::at_shared_located_row()).
    void evaluate_row(const prepared_query& p, int first, std::size_t n, layer_cost* out) const noexcept {
        if (p.slot < 0 || !p.shared || p.count == 0) {
            for (std::size_t k = 0; k < n; ++k) out[k] = evaluate(p, first + static_cast<int>(k));
            return;
        }
        static constexpr std::array<estimate<double> layer_cost::*, metrics> field{
            &layer_cost::forward_ms, &layer_cost::backward_ms, &layer_cost::stored_mb, &layer_cost::peak_mb};
        if (!p.all_metrics)
            for (std::size_t k = 0; k < n; ++k) out[k] = layer_cost{};
        profile_grid::at_shared_located_row(p.grids.data(), p.count, first, n, p.lengths, scheme_, p.memo,
                                            [&](std::size_t k, std::size_t i, const estimate<double>& v) {
                                                out[k].*field[p.which[i]] = v;
                                            });
    }

    /// One metric of a query.
    [[nodiscard]] estimate<double> metric(const layer_query& q, cost_metric which,
                                          interpolation_scheme scheme) const noexcept {
        const profile_grid* g = grid(q.tp, q.recompute, q.comp, which);
        if (!g) return estimate<double>::unsupported();
        return g->at(q.mbs, q.seqlen_tokens, q.dec_seqlen_tokens, scheme);
    }

    /// fp16 parameter memory (MB) of one layer / the embedding, from `_model_state.csv`;
    /// unsupported when the profile has no such row.
    [[nodiscard]] estimate<double> parameter_mb(component comp, int tp, recompute_mode r) const noexcept {
        const int t = tp_slot(tp);
        if (t < 0 || static_cast<std::size_t>(r) >= recompute_modes || static_cast<std::size_t>(comp) >= components)
            return estimate<double>::unsupported();
        const double v = parameter_mb_[static_cast<std::size_t>(t) * state_slots_per_tp +
                                       static_cast<std::size_t>(r) * components + static_cast<std::size_t>(comp)];
        if (std::isnan(v)) return estimate<double>::unsupported();
        return v;
    }

    /// The grid of one metric, or nullptr when the profile has none.
    [[nodiscard]] const profile_grid* grid(int tp, recompute_mode r, component comp,
                                           cost_metric which) const noexcept {
        const int t = tp_slot(tp);
        if (t < 0 || static_cast<std::size_t>(r) >= recompute_modes || static_cast<std::size_t>(comp) >= components)
            return nullptr;
        const int i = grid_index_[static_cast<std::size_t>(t) * grid_slots_per_tp +
                                  (static_cast<std::size_t>(r) * components + static_cast<std::size_t>(comp)) * metrics +
                                  static_cast<std::size_t>(which)];
        return i < 0 ? nullptr : &grids_of_mode()[static_cast<std::size_t>(i)];
    }

private:
    static constexpr std::size_t components = all_components.size();
    static constexpr std::size_t recompute_modes = all_recompute_modes.size();
    static constexpr std::size_t metrics = all_cost_metrics.size();
    static constexpr std::size_t grid_slots_per_tp = recompute_modes * components * metrics;
    static constexpr std::size_t state_slots_per_tp = recompute_modes * components;

    struct entry {
        int tp;
        recompute_mode rc;
        component comp;
        cost_metric metric;
        int mbs, enc, dec;
        double value;
        const csv_table* table;  // for error messages
        std::size_t row;
        std::size_t slot;  // grid slot, set once the tp degrees are known
    };
    struct state_entry {
        int tp;
        recompute_mode rc;
        component comp;
        double value;
    };

    profile_cost_model() = default;

    // A profile on disk must price the embedding wherever it prices layers' parameters:
    // otherwise model states would silently count 0 MB for it.
    void check_embedding_rows(const std::string& state_source) const {
        for (const int tp : tps_)
            for (const recompute_mode r : all_recompute_modes) {
                const bool layers = parameter_mb(component::encoder, tp, r).ok() ||
                                    parameter_mb(component::decoder, tp, r).ok();
                if (layers && !parameter_mb(component::embedding, tp, r).ok())
                    throw input_error(state_source, 0, "component",
                                      "no 'embedding' row for tp " + std::to_string(tp) + ", recompute " +
                                          std::string(to_string(r)) +
                                          " (the layers of that configuration have one; model states need both)");
            }
    }

    void set_mode(interpolation_mode mode) noexcept {
        mode_ = mode;
        scheme_ = scheme_of(mode);
        aggregation_ = aggregation_of(mode);
    }
    [[nodiscard]] const std::vector<profile_grid>& grids_of_mode() const noexcept {
        return grids_[static_cast<std::size_t>(aggregation_)];
    }

    [[nodiscard]] int tp_slot(int tp) const noexcept {
        const auto it = std::lower_bound(tps_.begin(), tps_.end(), tp);  // tps_ is sorted
        return it != tps_.end() && *it == tp ? static_cast<int>(it - tps_.begin()) : -1;
    }

    [[nodiscard]] estimate<double> lookup(std::size_t slot, const layer_query& q,
                                          interpolation_scheme scheme) const noexcept {
        const int i = grid_index_[slot];
        if (i < 0) return estimate<double>::unsupported();
        return grids_of_mode()[static_cast<std::size_t>(i)].at(q.mbs, q.seqlen_tokens, q.dec_seqlen_tokens, scheme);
    }

    // Parses a name with `parse` (which throws invalid_argument listing valid names) and
    // rethrows as input_error naming the cell.
    template <class Parse>
    static auto parse_cell(const csv_table& t, std::size_t row, std::size_t col, Parse parse) {
        try {
            return parse(t.cell(row, col));
        } catch (const invalid_argument& e) {
            t.fail(row, col, e.what());
        }
    }

    static int parse_tp(const csv_table& t, std::size_t row, std::size_t col) {
        return static_cast<int>(t.integer(row, col, 1, 1 << 16));
    }

    static void read_metric_table(const csv_table& t, std::string_view kind_column, std::string_view value_column,
                                  bool is_time, std::vector<entry>& out) {
        const std::size_t c_tp = t.column("tp"), c_rc = t.column("recompute"), c_comp = t.column("component"),
                          c_kind = t.column(kind_column), c_enc = t.column("enc_seqlen"),
                          c_dec = t.column("dec_seqlen"), c_mbs = t.column("mbs"), c_val = t.column(value_column);
        out.reserve(out.size() + t.rows());
        for (std::size_t r = 0; r < t.rows(); ++r) {
            entry e{};
            e.tp = parse_tp(t, r, c_tp);
            e.rc = parse_cell(t, r, c_rc, [](std::string_view s) { return parse_recompute(s); });
            e.comp = parse_cell(t, r, c_comp, [](std::string_view s) { return parse_component(s); });
            e.metric = parse_cell(t, r, c_kind, [is_time](std::string_view s) {
                if (is_time)
                    return parse_name<time_phase>(s) == time_phase::forward ? cost_metric::forward_ms
                                                                            : cost_metric::backward_ms;
                return parse_name<memory_kind>(s) == memory_kind::stored ? cost_metric::stored_mb : cost_metric::peak_mb;
            });
            e.enc = static_cast<int>(t.integer(r, c_enc, 0, 1 << 24));
            e.dec = static_cast<int>(t.integer(r, c_dec, 0, 1 << 24));
            e.mbs = static_cast<int>(t.integer(r, c_mbs, 1, 1 << 24));
            e.value = t.non_negative(r, c_val);
            if (is_time && !(e.value > 0)) t.fail(r, c_val, "expected a positive time, found '" +
                                                              std::string(t.cell(r, c_val)) + "'");
            e.table = &t;
            e.row = r;
            out.push_back(e);
        }
    }

    static std::vector<state_entry> read_model_state(const csv_table& t) {
        const std::size_t c_tp = t.column("tp"), c_rc = t.column("recompute"), c_comp = t.column("component"),
                          c_val = t.column("memory_mb");
        std::vector<state_entry> out;
        out.reserve(t.rows());
        for (std::size_t r = 0; r < t.rows(); ++r) {
            state_entry s{};
            s.tp = parse_tp(t, r, c_tp);
            s.rc = parse_cell(t, r, c_rc, [](std::string_view v) { return parse_recompute(v); });
            s.comp = parse_cell(t, r, c_comp, [](std::string_view v) { return parse_component(v); });
            s.value = t.non_negative(r, c_val);
            out.push_back(s);
        }
        return out;
    }

    /// Median of v (mean of the two middle values for an even count). v is reordered.
    static double median(std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        const std::size_t n = v.size();
        return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }

    [[nodiscard]] std::size_t slot_of(const entry& e) const {
        return static_cast<std::size_t>(tp_slot(e.tp)) * grid_slots_per_tp +
               (static_cast<std::size_t>(e.rc) * components + static_cast<std::size_t>(e.comp)) * metrics +
               static_cast<std::size_t>(e.metric);
    }

    void build_grids(std::vector<entry>& entries) {
        // Group entries by slot, then by coordinates (stable: keeps file order within a key).
        // The slot is computed once per entry: O(n log n) in all, whatever the number of tps.
        for (auto& e : entries) e.slot = slot_of(e);
        std::stable_sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) {
            if (a.slot != b.slot) return a.slot < b.slot;
            if (a.mbs != b.mbs) return a.mbs < b.mbs;
            if (a.enc != b.enc) return a.enc < b.enc;
            return a.dec < b.dec;
        });
        std::vector<double> repeats;
        for (std::size_t begin = 0; begin < entries.size();) {
            const std::size_t slot = entries[begin].slot;
            std::size_t end = begin;
            while (end < entries.size() && entries[end].slot == slot) ++end;
            std::array<std::vector<double>, profile_grid::axes> axis_values;
            for (std::size_t i = begin; i < end; ++i) {
                axis_values[0].push_back(entries[i].mbs);
                axis_values[1].push_back(entries[i].enc);
                axis_values[2].push_back(entries[i].dec);
            }
            static constexpr std::array<const char*, 3> axis_column{"mbs", "enc_seqlen", "dec_seqlen"};
            for (std::size_t k = 0; k < profile_grid::axes; ++k) {
                auto& a = axis_values[k];
                std::sort(a.begin(), a.end());
                a.erase(std::unique(a.begin(), a.end()), a.end());
                if (a.size() > 1 && a[0] == 0) {
                    // A length of 0 means "does not apply"; it cannot be mixed with lengths.
                    for (std::size_t i = begin; i < end; ++i) {
                        const int v = k == 1 ? entries[i].enc : entries[i].dec;
                        if (v == 0)
                            entries[i].table->fail(entries[i].row, entries[i].table->column(axis_column[k]),
                                                   "0 (not applicable) mixed with positive lengths for the same "
                                                   "tp/recompute/component/" +
                                                       std::string(entries[i].metric <= cost_metric::backward_ms
                                                                       ? "phase"
                                                                       : "kind"));
                    }
                }
            }
            // A dense grid far larger than its measurements (scattered lengths) would cost memory
            // out of all proportion to the file: refuse it.
            const double cells = static_cast<double>(axis_values[0].size()) * static_cast<double>(axis_values[1].size()) *
                                 static_cast<double>(axis_values[2].size());
            if (cells > std::max(65536.0, 64.0 * static_cast<double>(end - begin)))
                entries[begin].table->fail(entries[begin].row, entries[begin].table->column("mbs"),
                                           "the " + std::to_string(end - begin) +
                                               " measurements of this tp/recompute/component span a grid of " +
                                               std::to_string(static_cast<long long>(cells)) +
                                               " (mbs x enc_seqlen x dec_seqlen) points: too sparse to interpolate");
            auto index_of = [&](std::size_t k, double v) {
                return static_cast<std::size_t>(std::lower_bound(axis_values[k].begin(), axis_values[k].end(), v) -
                                                axis_values[k].begin());
            };
            const std::size_t n1 = axis_values[1].size(), n2 = axis_values[2].size();
            std::vector<double> medians(axis_values[0].size() * n1 * n2, std::numeric_limits<double>::quiet_NaN());
            std::vector<double> maxima = medians;
            for (std::size_t i = begin; i < end;) {
                std::size_t j = i;
                repeats.clear();
                while (j < entries.size() && j < end && entries[j].mbs == entries[i].mbs &&
                       entries[j].enc == entries[i].enc && entries[j].dec == entries[i].dec)
                    repeats.push_back(entries[j++].value);
                const std::size_t at = (index_of(0, entries[i].mbs) * n1 + index_of(1, entries[i].enc)) * n2 +
                                       index_of(2, entries[i].dec);
                medians[at] = median(repeats);  // sorts `repeats`
                maxima[at] = repeats.back();
                i = j;
            }
            grid_index_[slot] = static_cast<int>(grids_[0].size());
            grids_[0].emplace_back(axis_values, std::move(medians));
            grids_[1].emplace_back(std::move(axis_values), std::move(maxima));
            if (entries[begin].comp == component::decoder) encoder_decoder_ = true;
            begin = end;
        }
        // Which (tp, recompute, component) have all their metric grids on the same axes.
        shared_axes_.assign(grid_index_.size() / metrics, 0);
        for (std::size_t group = 0; group < shared_axes_.size(); ++group) {
            const profile_grid* first = nullptr;
            bool same = true;
            for (std::size_t i = 0; i < metrics; ++i) {
                const int g = grid_index_[group * metrics + i];
                if (g < 0) continue;
                const profile_grid& grid = grids_[0][static_cast<std::size_t>(g)];
                if (!first) first = &grid;
                else same = same && first->same_axes(grid);
            }
            shared_axes_[group] = same ? 1 : 0;
        }
    }

    void build_states(std::vector<state_entry>& states) {
        std::stable_sort(states.begin(), states.end(), [](const state_entry& a, const state_entry& b) {
            if (a.tp != b.tp) return a.tp < b.tp;
            if (a.rc != b.rc) return a.rc < b.rc;
            return a.comp < b.comp;
        });
        std::vector<double> repeats;
        for (std::size_t i = 0; i < states.size();) {
            std::size_t j = i;
            repeats.clear();
            while (j < states.size() && states[j].tp == states[i].tp && states[j].rc == states[i].rc &&
                   states[j].comp == states[i].comp)
                repeats.push_back(states[j++].value);
            parameter_mb_[static_cast<std::size_t>(tp_slot(states[i].tp)) * state_slots_per_tp +
                          static_cast<std::size_t>(states[i].rc) * components +
                          static_cast<std::size_t>(states[i].comp)] = median(repeats);
            if (states[i].comp == component::decoder) encoder_decoder_ = true;
            i = j;
        }
    }

    std::string name_;
    interpolation_mode mode_ = interpolation_mode::recommended;
    interpolation_scheme scheme_ = scheme_of(interpolation_mode::recommended);
    repeat_aggregation aggregation_ = aggregation_of(interpolation_mode::recommended);
    std::vector<int> tps_;
    std::vector<int> grid_index_;  // per (tp, recompute, component, metric): index into grids_ or -1
    std::array<std::vector<profile_grid>, 2> grids_;  // per repeat_aggregation, same axes
    std::vector<std::uint8_t> shared_axes_;  // per (tp, recompute, component): 1 = grids share axes
    std::vector<double> parameter_mb_;  // per (tp, recompute, component), NaN = none
    bool encoder_decoder_ = false;
};

static_assert(cost_model<profile_cost_model>);
static_assert(row_cost_model<profile_cost_model>);

}  // namespace pipeplan
