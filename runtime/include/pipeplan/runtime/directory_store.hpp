// pipeplan/runtime/directory_store.hpp — the plan store on a (shared) filesystem.
//
// Layout: ROOT/<job>/iteration_<i>/rank_<r>.plan, each file a sealed record (plan_store.hpp)
// written atomically (temporary file + rename), so a reader sees either nothing or a whole
// record. get() polls with a short backoff until the file appears or the timeout passes, then
// throws timeout_error naming the key and the path it waited for. Only regular files are read
// or written: a symlink, FIFO, directory or device at a key is an input_error at once (never
// followed, opened for blocking or replaced), and records over max_record_bytes are refused
// unread. lock_writer(job) takes ROOT/<job>/.writer.lock (flock, released with the lock
// object or when the process ends): a second writer of the job fails at once, naming it.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeplan/core/file.hpp"
#include "pipeplan/runtime/errors.hpp"
#include "pipeplan/runtime/plan_store.hpp"

namespace pipeplan::runtime {

/// Store records above this size are refused unread (a plan file's bound plus the envelope).
inline constexpr std::uint64_t max_record_bytes = plan::max_plan_file_bytes + (1u << 16);

class directory_store {
public:
    explicit directory_store(std::filesystem::path root, store_secret secret = {})
        : root_(std::move(root)), secret_(std::move(secret)) {
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
        write_file_atomically(path, seal(bytes, key, secret_), false);
    }

    /// The plan of `key`, waiting up to `timeout` for it to appear.
    [[nodiscard]] std::string get(const plan_key& key, timeout_ms timeout) const {
        const auto path = path_of(key);
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        auto pause = std::chrono::microseconds(200);
        for (;;) {
            struct ::stat st {};
            if (::lstat(path.c_str(), &st) == 0) {
                if (!S_ISREG(st.st_mode))
                    throw input_error(path.string(), 0, "", std::string("is ") + file_kind(st.st_mode) +
                                                                ", expected a regular file (plan store " + describe() + ")");
                const std::string record = read_regular_file(path, regular_read_options{max_record_bytes, false});
                return unseal(record, path.string(), key, secret_);
            }
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

    /// Makes this process the job's only writer until the returned lock is destroyed; throws
    /// pipeplan::error naming the job when another writer holds it.
    [[nodiscard]] writer_lock lock_writer(const std::string& job) {
        plan_key{job, 0, 0}.check();
        const std::filesystem::path dir = root_ / job, lock = dir / ".writer.lock";
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) throw error("plan store " + describe() + ": cannot create '" + dir.string() + "': " + ec.message());
        const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0) throw error("plan store " + describe() + ": cannot open '" + lock.string() + "': " + std::strerror(errno));
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            ::close(fd);
            throw error("plan store " + describe() + ": job '" + job + "' is being written by another planner (it holds '" +
                        lock.string() + "'); one planner per job: stop it or choose another job name");
        }
        return writer_lock([fd] { ::close(fd); });
    }

private:
    std::filesystem::path root_;
    store_secret secret_;
};

static_assert(plan_store<directory_store>);

}  // namespace pipeplan::runtime
