// The real profile cost models (../shared/data/cost_models), loaded once per (model, mode) and
// shared by the tests and benchmarks that read them. Not thread-safe: call from one thread.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "pipeplan/cost/profile.hpp"
#include "support.hpp"

namespace pipeplan::test {

/// The profile model `name` in `mode`, or nullptr without the shared data. The model lives
/// until the program ends.
inline const profile_cost_model* find_profile_model(const std::string& name, interpolation_mode mode) {
    static std::map<std::pair<std::string, interpolation_mode>, std::optional<profile_cost_model>> cache;
    auto key = std::make_pair(name, mode);
    auto it = cache.find(key);
    if (it == cache.end()) {
        std::optional<profile_cost_model> m;
        if (const auto dir = shared_data_dir()) m = profile_cost_model::load(*dir / "cost_models", name, mode);
        it = cache.emplace(std::move(key), std::move(m)).first;
    }
    return it->second ? &*it->second : nullptr;
}

/// The profile model `name` in `mode`; throws std::runtime_error without the shared data (use
/// it from test cases marked PIPEPLAN_NEEDS_DATA()).
inline const profile_cost_model& profile_model(const std::string& name, interpolation_mode mode) {
    if (const profile_cost_model* m = find_profile_model(name, mode)) return *m;
    throw std::runtime_error("profile model " + name + " needs the shared data (../shared/data/cost_models)");
}

}  // namespace pipeplan::test
