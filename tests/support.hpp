// Shared helpers for pipeplan's doctest suites.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>

#ifndef PIPEPLAN_SHARED_DATA_DIR
#define PIPEPLAN_SHARED_DATA_DIR "../shared/data"
#endif

namespace pipeplan::test {

/// The reference data folder (../shared/data beside the checkout, or $PIPEPLAN_DATA_DIR), or
/// nullopt when it is absent: tests that need it are registered with `* needs_data()` and are
/// reported as skipped.
inline std::optional<std::filesystem::path> shared_data_dir() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("PIPEPLAN_DATA_DIR"); env && *env) {
        if (fs::is_directory(env)) return fs::path(env);
        return std::nullopt;
    }
    const fs::path p(PIPEPLAN_SHARED_DATA_DIR);
    std::error_code ec;
    if (fs::is_directory(p / "cost_models", ec)) return fs::weakly_canonical(p, ec);
    return std::nullopt;
}

inline bool has_shared_data() { return shared_data_dir().has_value(); }

}  // namespace pipeplan::test

/// Decorator for test cases that read ../shared/data: `TEST_CASE("x" * needs_data())`.
#define PIPEPLAN_NEEDS_DATA() doctest::skip(!::pipeplan::test::has_shared_data())
