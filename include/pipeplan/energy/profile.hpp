// pipeplan/energy/profile.hpp — time–energy profiles of the computations of a pipeline.
//
// A profile gives, per (op kind, stage), the (GPU frequency, time, energy) points of one
// computation, as Perseus profiles every forward and backward of every stage at every supported
// frequency. It comes from a CSV file (read_energy_profile_csv, format in docs/formats.md) or
// from the analytic DVFS model of an A100 (dvfs_model, constants in docs/energy.md).
//
// A curve is applied to an op of the scenario by scaling: the op's scenario time is its time at
// the curve's fastest point, so an op of duration d gets, at frequency f, the time
// d · time(f) / time(fastest) and the energy d · energy(f) / time(fastest). A profile keeps
// every point; an op's options are the Pareto-optimal ones in Perseus's sense (problem.hpp):
// no other point is both faster and cheaper in *effective* energy, energy − P_idle · time
// (what the computation draws beyond a waiting GPU, zeus's pipeline_frequency optimizer).
//
// Units: frequency MHz, time ms, energy J, power W (1 W · 1 ms = 1e-3 J).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/csv.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/schedule/op.hpp"

namespace pipeplan::energy {

/// One way to run a computation: at `frequency_mhz` it takes `time_ms` and uses `energy_j`.
struct energy_point {
    double frequency_mhz = 0.0;
    double time_ms = 0.0;
    double energy_j = 0.0;

    friend bool operator==(const energy_point&, const energy_point&) = default;
};

/// The Pareto-optimal points of `pts` in (time, effective energy = energy − idle_power_w ·
/// time) (no other point has time <= and effective energy <= with one of them <), fastest
/// first: time strictly increasing, effective energy strictly decreasing; the points keep their
/// raw energy. Among equal points the highest frequency is kept. idle_power_w = 0: the plain
/// (time, energy) front. With idle power this is Perseus's candidate filter: a clock slower
/// than the raw minimum-energy one stays when the energy it adds is less than what the GPU
/// would draw waiting for the same time.
[[nodiscard]] inline std::vector<energy_point> pareto_front(std::vector<energy_point> pts, double idle_power_w = 0.0) {
    const auto effective = [idle_power_w](const energy_point& p) { return p.energy_j - idle_power_w * p.time_ms * 1e-3; };
    std::sort(pts.begin(), pts.end(), [](const energy_point& a, const energy_point& b) {
        if (a.time_ms != b.time_ms) return a.time_ms < b.time_ms;
        if (a.energy_j != b.energy_j) return a.energy_j < b.energy_j;
        return a.frequency_mhz > b.frequency_mhz;
    });
    std::vector<energy_point> out;
    for (const energy_point& p : pts)
        if (out.empty() || effective(p) < effective(out.back())) {
            if (!out.empty() && out.back().time_ms == p.time_ms) continue;  // same time, more energy
            out.push_back(p);
        }
    return out;
}

/// Power of a GPU in W at `frequency_mhz` (the model's interface: anything with these members
/// can generate curves, see curve_from_model).
template <class M>
concept dvfs_power_model = requires(const M& m, double f) {
    { m.frequencies_mhz() } -> std::convertible_to<std::vector<double>>;
    { m.relative_time(f, schedule::op_kind::F) } -> std::convertible_to<double>;
    { m.power_w(f) } -> std::convertible_to<double>;
    { m.idle_power_w } -> std::convertible_to<double>;
};

/// The analytic DVFS model of an NVIDIA A100 SXM4 40 GB (see docs/energy.md for the sources):
/// - frequencies 210..1410 MHz in 15 MHz steps (81 clocks, `nvidia-smi -q -d SUPPORTED_CLOCKS`);
/// - time(f) = t_max · (c · f_max / f + (1 - c)): the compute-bound share c scales with the
///   clock, the memory-bound rest does not;
/// - power(f) = P_static + P_dynamic · (f / f_max) · (V(f) / V_max)^2 with V linear in f from
///   v_min_ratio · V_max at the lowest clock to V_max at the highest;
/// - a GPU that waits (pipeline bubble, blocked on communication) draws idle_power_w.
struct dvfs_model {
    double min_mhz = 210.0;
    double max_mhz = 1410.0;
    double step_mhz = 15.0;
    double static_power_w = 100.0;   ///< clock-independent draw while computing (HBM, leakage)
    double dynamic_power_w = 300.0;  ///< clock-dependent draw at max_mhz (static + dynamic = 400 W TDP)
    double idle_power_w = 60.0;      ///< draw while waiting
    double v_min_ratio = 0.7;        ///< V(min_mhz) / V(max_mhz)
    double compute_fraction_forward = 0.85;   ///< share of a forward's time that scales with the clock
    double compute_fraction_backward = 0.85;  ///< same for B and W

    [[nodiscard]] std::vector<double> frequencies_mhz() const {
        if (!(min_mhz > 0.0) || !(max_mhz >= min_mhz) || !(step_mhz > 0.0))
            throw invalid_argument("dvfs_model: need 0 < min_mhz <= max_mhz and step_mhz > 0");
        std::vector<double> f;
        for (double x = min_mhz; x <= max_mhz + 1e-9; x += step_mhz) f.push_back(x);
        if (f.back() < max_mhz - 1e-9) f.push_back(max_mhz);
        return f;
    }
    /// time(f) / time(max_mhz) of a computation of kind k.
    [[nodiscard]] double relative_time(double f_mhz, schedule::op_kind k) const {
        const double c = schedule::is_forward(k) || k == schedule::op_kind::R ? compute_fraction_forward
                                                                               : compute_fraction_backward;
        return c * max_mhz / f_mhz + (1.0 - c);
    }
    [[nodiscard]] double power_w(double f_mhz) const {
        const double x = f_mhz / max_mhz;
        const double span = max_mhz > min_mhz ? (f_mhz - min_mhz) / (max_mhz - min_mhz) : 1.0;
        const double v = v_min_ratio + (1.0 - v_min_ratio) * span;
        return static_power_w + dynamic_power_w * x * v * v;
    }
};

/// Per (op kind, stage) time–energy curves plus the idle power. Kinds are looked up as: f and
/// R use F's curve; W uses W's curve, else B's. A curve stored for `any_stage` serves every
/// stage without its own.
struct energy_profile {
    static constexpr std::uint32_t any_stage = std::numeric_limits<std::uint32_t>::max();
    double idle_power_w = 0.0;
    std::map<std::pair<char, std::uint32_t>, std::vector<energy_point>> curves;  ///< every point, fastest first
    std::string source = "<memory>";  ///< named in errors

    /// Stores every point (sorted fastest first; the Pareto filter depends on the idle power and
    /// is applied per op, energy_problem).
    void set_curve(schedule::op_kind k, std::uint32_t stage, std::vector<energy_point> pts) {
        curves[{schedule::letter(k), stage}] = sorted_fastest_first(std::move(pts));
    }
    [[nodiscard]] static std::vector<energy_point> sorted_fastest_first(std::vector<energy_point> pts) {
        std::stable_sort(pts.begin(), pts.end(), [](const energy_point& a, const energy_point& b) {
            return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.frequency_mhz > b.frequency_mhz;
        });
        return pts;
    }

    /// The curve of op kind `k` on `stage`; throws pipeplan::invalid_argument when absent.
    [[nodiscard]] const std::vector<energy_point>& curve(schedule::op_kind k, std::uint32_t stage) const {
        char key = schedule::letter(k);
        if (k == schedule::op_kind::F_checkpoint || k == schedule::op_kind::R) key = 'F';
        for (const char c : {key, key == 'W' ? 'B' : key})
            for (const std::uint32_t s : {stage, any_stage})
                if (auto it = curves.find({c, s}); it != curves.end()) return it->second;
        throw invalid_argument(source + ": the energy profile has no curve for kind " + std::string(1, key) +
                               " on stage " + std::to_string(stage));
    }
};

/// Curves for F, B and W on every stage from a DVFS model, every clock; a 1 ms computation
/// at the top clock (curves are scaled to each op's time when applied).
template <dvfs_power_model M>
[[nodiscard]] energy_profile profile_from_model(const M& model, std::string name = "a100") {
    energy_profile p;
    p.source = std::move(name);
    p.idle_power_w = model.idle_power_w;
    const std::vector<double> fs = model.frequencies_mhz();
    for (const auto k : {schedule::op_kind::F, schedule::op_kind::B, schedule::op_kind::W}) {
        std::vector<energy_point> pts;
        for (const double f : fs) {
            const double t_ms = model.relative_time(f, k);
            pts.push_back({f, t_ms, model.power_w(f) * t_ms * 1e-3});
        }
        p.set_curve(k, energy_profile::any_stage, std::move(pts));
    }
    return p;
}

/// The A100 profile (dvfs_model's defaults).
[[nodiscard]] inline energy_profile a100_profile() { return profile_from_model(dvfs_model{}, "a100"); }

/// GPUs with a built-in DVFS model (`--gpu NAME`).
enum class gpu_model : std::uint8_t { a100 };
[[nodiscard]] constexpr auto enum_names(gpu_model) noexcept {
    return name_table<gpu_model, 1>{"GPU", {{{gpu_model::a100, "a100"}}}};
}

/// The built-in profile of a GPU.
[[nodiscard]] inline energy_profile gpu_profile(gpu_model g) {
    switch (g) {
        case gpu_model::a100: return a100_profile();
    }
    throw invalid_argument("energy: unknown GPU model");
}

/// Ranges of a profile CSV's values (its errors quote them).
inline constexpr double max_profile_time_ms = 1e9;
inline constexpr double max_profile_energy_j = 1e12;
inline constexpr double max_profile_frequency_mhz = 1e6;
inline constexpr double max_profile_power_w = 1e6;  ///< the idle row's energy_j / time_ms

/// Reads a profile CSV: columns kind (F, B, W or idle), stage (an integer, or * for every
/// stage), frequency_mhz, time_ms, energy_j; one row per measured point. An `idle` row gives
/// the idle power as energy_j / time_ms (its frequency and stage are ignored). Other columns
/// are ignored. Values: time_ms in (0, 1e9], energy_j in [0, 1e12], frequency_mhz in (0, 1e6],
/// idle power at most 1e6 W. Throws pipeplan::input_error naming file, line, column and range.
[[nodiscard]] inline energy_profile parse_energy_profile_csv(const csv_table& t) {
    energy_profile p;
    p.source = t.source();
    const std::size_t c_kind = t.column("kind"), c_stage = t.column("stage"), c_f = t.column("frequency_mhz"),
                      c_t = t.column("time_ms"), c_e = t.column("energy_j");
    std::map<std::pair<char, std::uint32_t>, std::vector<energy_point>> raw;
    std::map<std::pair<char, std::uint32_t>, std::size_t> first_line;
    bool have_idle = false;
    for (std::size_t r = 0; r < t.rows(); ++r) {
        const std::string_view kind = t.cell(r, c_kind);
        const double time_ms = t.number_in(r, c_t, 0.0, max_profile_time_ms, "ms");
        const double energy_j = t.number_in(r, c_e, 0.0, max_profile_energy_j, "J");
        if (kind == "idle") {
            if (have_idle) t.fail(r, c_kind, "a second idle row");
            if (!(time_ms > 0.0)) t.fail(r, c_t, "the idle row needs a time > 0");
            p.idle_power_w = energy_j / time_ms * 1e3;
            if (!(p.idle_power_w <= max_profile_power_w))
                t.fail(r, c_e, "the idle power energy_j / time_ms is " + std::to_string(p.idle_power_w) +
                                   " W, outside " + range_text(0, max_profile_power_w) + " W");
            have_idle = true;
            continue;
        }
        if (kind != "F" && kind != "B" && kind != "W") t.fail(r, c_kind, "expected F, B, W or idle, found '" + std::string(kind) + "'");
        const std::uint32_t stage = t.cell(r, c_stage) == "*"
                                        ? energy_profile::any_stage
                                        : static_cast<std::uint32_t>(t.integer(r, c_stage, 0, 1 << 20));
        const double f = t.number_in(r, c_f, 0.0, max_profile_frequency_mhz, "MHz");
        if (!(f > 0.0)) t.fail(r, c_f, "the frequency must be > 0");
        if (!(time_ms > 0.0)) t.fail(r, c_t, "the time must be > 0");
        const std::pair<char, std::uint32_t> key{kind[0], stage};
        for (const energy_point& q : raw[key])
            if (q.frequency_mhz == f)
                t.fail(r, c_f, "frequency " + std::string(t.cell(r, c_f)) + " appears twice for kind " +
                                   std::string(kind) + " on this stage (first on line " +
                                   std::to_string(first_line[key]) + ")");
        if (raw[key].empty()) first_line[key] = t.line_of(r);
        raw[key].push_back({f, time_ms, energy_j});
    }
    if (!have_idle) throw input_error(t.source(), 0, "kind", "no idle row (kind idle: the power of a waiting GPU)");
    if (raw.empty()) throw input_error(t.source(), 0, "", "no F/B/W rows");
    for (auto& [key, pts] : raw) p.curves[key] = energy_profile::sorted_fastest_first(std::move(pts));
    return p;
}

/// Reads a profile CSV file (parse_energy_profile_csv).
[[nodiscard]] inline energy_profile read_energy_profile_csv(const std::filesystem::path& path) {
    return parse_energy_profile_csv(csv_table::read(path));
}

/// The points of one op of scenario time `duration_ms` under `curve` (fastest first): the
/// curve scaled so that its fastest point takes `duration_ms`. A zero-time op has
/// one option (the fastest frequency, no time, no energy).
[[nodiscard]] inline std::vector<energy_point> scale_curve(const std::vector<energy_point>& curve, double duration_ms) {
    if (curve.empty()) throw invalid_argument("energy: empty curve");
    if (!(duration_ms > 0.0)) return {{curve.front().frequency_mhz, 0.0, 0.0}};
    const double k = duration_ms / curve.front().time_ms;
    std::vector<energy_point> out;
    out.reserve(curve.size());
    for (const energy_point& p : curve) out.push_back({p.frequency_mhz, p.time_ms * k, p.energy_j * k});
    return out;
}

}  // namespace pipeplan::energy
