// Shared helpers for pipeplan's doctest suites and benchmarks.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace pipeplan::test {

/// The places searched for the reference data, in order: $PIPEPLAN_DATA_DIR (when set, the only
/// place), ../shared/data beside $PIPEPLAN_SOURCE_DIR (set by `meson test`), then ../shared/data
/// beside every folder above the running executable and above the working directory. Everything
/// is looked up at run time, so a moved checkout (with its build folder) still finds its data.
inline std::vector<std::filesystem::path> data_dir_candidates() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("PIPEPLAN_DATA_DIR"); env && *env) return {fs::path(env)};
    std::vector<fs::path> out;
    if (const char* src = std::getenv("PIPEPLAN_SOURCE_DIR"); src && *src)
        out.push_back(fs::path(src) / ".." / "shared" / "data");
    std::error_code ec;
    for (fs::path start : {fs::read_symlink("/proc/self/exe", ec).parent_path(), fs::current_path(ec)}) {
        for (fs::path p = start; !p.empty(); p = p.parent_path()) {
            out.push_back(p / ".." / "shared" / "data");
            if (p == p.parent_path()) break;
        }
    }
    return out;
}

/// The reference data folder, or nullopt when it is absent: tests that need it are registered
/// with `* needs_data()` and are reported as skipped.
inline std::optional<std::filesystem::path> shared_data_dir() {
    namespace fs = std::filesystem;
    static const std::optional<fs::path> found = [] () -> std::optional<fs::path> {
        const auto candidates = data_dir_candidates();
        std::error_code ec;
        if (std::getenv("PIPEPLAN_DATA_DIR") && *std::getenv("PIPEPLAN_DATA_DIR")) {
            if (fs::is_directory(candidates.front(), ec)) return candidates.front();
            return std::nullopt;
        }
        for (const fs::path& p : candidates)
            if (fs::is_directory(p / "cost_models", ec)) return fs::weakly_canonical(p, ec);
        return std::nullopt;
    }();
    return found;
}

inline bool has_shared_data() { return shared_data_dir().has_value(); }

/// One line saying where the data was looked for (the note printed when it is absent).
inline std::string data_dir_search_text() {
    if (const char* env = std::getenv("PIPEPLAN_DATA_DIR"); env && *env)
        return std::string("$PIPEPLAN_DATA_DIR = ") + env;
    return "$PIPEPLAN_DATA_DIR (unset), then ../shared/data beside $PIPEPLAN_SOURCE_DIR and beside every folder "
           "above this executable and the working directory";
}

}  // namespace pipeplan::test

/// Decorator for test cases that read ../shared/data: `TEST_CASE("x" * needs_data())`.
#define PIPEPLAN_NEEDS_DATA() doctest::skip(!::pipeplan::test::has_shared_data())
