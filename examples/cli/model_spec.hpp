// Model selection shared by the CLI subcommands (`cost`, `split`, ...): a `--model` string names
// either a profiled model (a file prefix in `--profiles DIR`, e.g. `gpt_6.7b`, `t5_11b`) or an
// analytic preset (`analytic:<preset>`, e.g. `analytic:gpt-6.7b`).
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/profile.hpp"

namespace pipeplan::cli {

/// The prefix of `--model` values that select the analytic model.
inline constexpr std::string_view analytic_prefix = "analytic:";

/// True when `model_name` selects the analytic model (`analytic:<preset>`).
[[nodiscard]] inline bool is_analytic_model(std::string_view model_name) noexcept {
    return model_name.starts_with(analytic_prefix);
}

/// Throws invalid_argument when `model` is a profile without measurements for tensor-parallel
/// degree `tp`, naming the profiled degrees (the analytic model prices every degree).
template <class Model>
void require_profiled_tp(const Model& model, int tp) {
    if constexpr (std::is_same_v<Model, profile_cost_model>) {
        const std::vector<int>& tps = model.tp_degrees();
        if (std::find(tps.begin(), tps.end(), tp) != tps.end()) return;
        std::string have;
        for (const int t : tps) have += (have.empty() ? "" : ", ") + std::to_string(t);
        throw invalid_argument("--tp " + std::to_string(tp) + " is not in profile '" + model.name() +
                               "' (profiled: " + have + ")");
    }
}

/// Builds the cost model `model_name` names and calls `f(const auto& model)` with it, returning
/// what `f` returns (`f` must return the same type for both model types).
///  - `analytic:<preset>`: pipeplan::make_analytic_model(preset) on the default hardware
///    (`profiles_dir` and `mode` are ignored);
///  - anything else: profile_cost_model::load(profiles_dir, model_name, mode). An empty
///    `profiles_dir` is an error (there is no default location for profiles).
/// Throws pipeplan::invalid_argument / input_error for unknown names or bad files.
template <class F>
decltype(auto) with_cost_model(const std::filesystem::path& profiles_dir, std::string_view model_name,
                               interpolation_mode mode, F&& f) {
    if (is_analytic_model(model_name)) {
        const analytic_cost_model model = make_analytic_model(model_name.substr(analytic_prefix.size()));
        return std::forward<F>(f)(model);
    }
    if (profiles_dir.empty())
        throw invalid_argument("model '" + std::string(model_name) +
                               "' is a profiled model: pass --profiles DIR (the folder holding " +
                               std::string(model_name) +
                               "_timing.csv, e.g. ../shared/data/cost_models), or use --model "
                               "analytic:<preset>");
    const profile_cost_model model = profile_cost_model::load(profiles_dir, model_name, mode);
    return std::forward<F>(f)(model);
}

}  // namespace pipeplan::cli
