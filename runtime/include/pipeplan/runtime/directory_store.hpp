// pipeplan/runtime/directory_store.hpp — the plan store on a (shared) filesystem.
//
// Layout: ROOT/<job>/iteration_<i>/rank_<r>.plan, each file a sealed record (plan_store.hpp)
// written atomically (core/file.hpp: temporary file + rename), so a reader sees either nothing
// or a whole plan. get() polls with a short backoff until the file appears or the timeout
// passes, then throws timeout_error naming the key and the path it waited for.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "pipeplan/core/file.hpp"
#include "pipeplan/runtime/errors.hpp"
#include "pipeplan/runtime/plan_store.hpp"

namespace pipeplan::runtime {

class directory_store {
public:
    explicit directory_store(std::filesystem::path root) : root_(std::move(root)) {
        if (root_.empty()) throw invalid_argument("directory store: empty path");
    }

    [[nodiscard]] std::string describe() const { return "dir:" + root_.string(); }
    [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }

    [[nodiscard]] std::filesystem::path path_of(const plan_key& key) const {
        key.check();
        return root_ / key.job / ("iteration_" + std::to_string(key.iteration)) / ("rank_" + std::to_string(key.rank) + ".plan");
    }

    void put(const plan_key& key, std::string_view bytes) {
        const auto path = path_of(key);
        std::error_code ec;
        std::filesystem::create_directories(path.parent_path(), ec);
        if (ec) throw error("plan store " + describe() + ": cannot create '" + path.parent_path().string() + "': " + ec.message());
        write_file_atomically(path, seal(bytes));
    }

    /// The plan of `key`, waiting up to `timeout` for it to appear.
    [[nodiscard]] std::string get(const plan_key& key, timeout_ms timeout) const {
        const auto path = path_of(key);
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        auto pause = std::chrono::microseconds(200);
        for (;;) {
            std::error_code ec;
            if (std::filesystem::exists(path, ec)) return unseal(plan::read_file_bytes(path), path.string());
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline)
                throw timeout_error("plan store " + describe() + ": plan " + key.str() + " not available after " +
                                    std::to_string(timeout.count()) + " ms (waited for " + path.string() + ")");
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
            pause = std::min(pause * 2, std::chrono::microseconds(20000));
        }
    }

    /// Removes the plan of `key` (nothing when absent): trainers drop consumed iterations.
    void remove(const plan_key& key) {
        std::error_code ec;
        std::filesystem::remove(path_of(key), ec);
    }

private:
    std::filesystem::path root_;
};

static_assert(plan_store<directory_store>);

}  // namespace pipeplan::runtime
