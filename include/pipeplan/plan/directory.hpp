// pipeplan/plan/directory.hpp — a whole plan as a directory: rank_<r>.plan (or .json) for
// every rank plus the manifest plan.json, written and read as one unit.
//
// Writing (write_plan_directory) never leaves a mixture:
//  - the plan is stamped with its identity (plan/identity.hpp), so every rank file and the
//    manifest name the same plan_id;
//  - the files go to a sibling temporary directory ".<name>.tmp.XXXXXX", which then replaces
//    DIR in one step (renameat2 RENAME_EXCHANGE; where the filesystem lacks it, two renames),
//    and the old content is removed: rank files of an earlier, larger plan never survive, and a
//    writer killed at any point leaves DIR as it was (plus a temporary sibling that the next
//    writer removes);
//  - writers of one DIR serialise on the lock file ".<name>.lock" beside it (flock, released
//    when the writer ends, also when it is killed): a second writer fails at once with an error
//    naming DIR, never waits or mixes;
//  - an existing DIR is replaced only when it is empty or a plan directory (plan.json and
//    rank files only); anything else there is refused, naming what is in the way.
// Reading (read_plan_directory) checks the manifest, reads every rank file it lists (regular
// files only, size-bounded), and requires one program per rank 0..n-1, equal headers and the
// manifest's plan_id in every file; other files in DIR are an error. Errors are
// pipeplan::input_error / pipeplan::error naming the file and the field.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/core/parallel.hpp"
#include "pipeplan/plan/identity.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/plan_file.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::plan {

inline constexpr std::string_view plan_manifest_name = "plan.json";
inline constexpr std::string_view plan_manifest_format = "pipeplan-plan-manifest";
inline constexpr std::uint64_t max_manifest_bytes = std::uint64_t(1) << 24;

/// The file name of rank `r` in a plan directory.
[[nodiscard]] inline std::string rank_file_name(std::size_t r, bool json) {
    return "rank_" + std::to_string(r) + (json ? ".json" : ".plan");
}


namespace detail {

/// Whether `name` is one of the files a plan directory holds (plan.json, rank_<r>.plan|json).
[[nodiscard]] inline bool is_plan_dir_entry(const std::string& name) {
    if (name == plan_manifest_name) return true;
    for (const std::string_view ext : {".plan", ".json"}) {
        if (name.size() <= 5 + ext.size() || name.compare(0, 5, "rank_") != 0 ||
            name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
            continue;
        const std::string digits = name.substr(5, name.size() - 5 - ext.size());
        if (digits.find_first_not_of("0123456789") == std::string::npos) return true;
    }
    return false;
}

/// The parts of DIR: its parent and its name (a trailing '/' ignored).
[[nodiscard]] inline std::pair<std::filesystem::path, std::string> split_dir(const std::filesystem::path& dir) {
    std::filesystem::path d = dir.lexically_normal();
    if (d.filename().empty()) d = d.parent_path();
    const std::string name = d.filename().string();
    if (name.empty() || name == "." || name == "..")
        throw invalid_argument("plan directory '" + dir.string() + "': name a directory of its own (not '.', '..' or '/')");
    return {d.has_parent_path() ? d.parent_path() : std::filesystem::path("."), name};
}

/// The writer's lock: an flock on ".<name>.lock" beside DIR, held while the object lives.
class dir_lock {
public:
    dir_lock(const std::filesystem::path& parent, const std::string& name, const std::filesystem::path& dir) {
        const std::filesystem::path lock = parent / ("." + name + ".lock");
        fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd_ < 0) throw error("plan directory '" + dir.string() + "': cannot open the lock file '" + lock.string() + "': " +
                                 std::strerror(errno));
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            ::close(fd_);
            throw error("plan directory '" + dir.string() + "' is being written by another process (it holds '" + lock.string() +
                        "'); " + (err == EWOULDBLOCK ? std::string("wait for it to finish or write elsewhere")
                                                     : std::string(std::strerror(err))));
        }
    }
    ~dir_lock() { ::close(fd_); }
    dir_lock(const dir_lock&) = delete;
    dir_lock& operator=(const dir_lock&) = delete;

private:
    int fd_ = -1;
};

/// Refuses to replace anything but an empty or plan directory at `dir`; false when absent.
[[nodiscard]] inline bool check_replaceable(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(dir, ec);
    if (!fs::exists(st)) return false;
    if (fs::is_symlink(st)) throw error("plan directory '" + dir.string() + "' is a symbolic link; name the real directory");
    if (!fs::is_directory(st)) throw error("plan directory '" + dir.string() + "' exists and is not a directory");
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (!is_plan_dir_entry(e.path().filename().string()) || !e.is_regular_file())
            throw error("plan directory '" + dir.string() + "' holds '" + e.path().filename().string() +
                        "', which is not part of a plan: refusing to replace it");
    if (ec) throw error("plan directory '" + dir.string() + "': cannot list it: " + ec.message());
    return true;
}

/// Removes temporary siblings ".<name>.tmp.*" that killed writers left (the lock is held).
inline void remove_stale_temporaries(const std::filesystem::path& parent, const std::string& name) {
    namespace fs = std::filesystem;
    const std::string prefix = "." + name + ".tmp.";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(parent, ec))
        if (e.path().filename().string().rfind(prefix, 0) == 0 && e.is_directory() && !e.is_symlink()) fs::remove_all(e.path(), ec);
}

/// Puts the finished temporary directory `tmp` at `dir` (replacing an old one) and removes the old content.
inline void swap_into_place(const std::filesystem::path& tmp, const std::filesystem::path& dir, bool exists) {
    std::error_code ec;
    if (!exists) {
        if (::rename(tmp.c_str(), dir.c_str()) != 0)
            throw error("plan directory '" + dir.string() + "': cannot move the new plan into place: " + std::strerror(errno));
        return;
    }
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
        // No atomic exchange on this filesystem: move the old plan aside, then the new one in.
        const std::filesystem::path old = tmp.string() + ".old";
        if (::rename(dir.c_str(), old.c_str()) != 0 || ::rename(tmp.c_str(), dir.c_str()) != 0)
            throw error("plan directory '" + dir.string() + "': cannot replace it: " + std::strerror(errno));
        std::filesystem::remove_all(old, ec);
        return;
    }
    std::filesystem::remove_all(tmp, ec);  // now the old plan
}

/// Writes rank `k`'s file into the temporary directory `tmp`: JSON, or the binary frame of
/// the stamped header's and the program's bytes in `parts` (plan/serialize.hpp), whose
/// checksum continues `header_sum`, the FNV-1a of the header's bytes.
inline void write_rank_file(const std::filesystem::path& tmp, const execution_plan& p, const binary_parts& parts,
                            std::uint64_t header_sum, std::size_t k, bool json) {
    const std::filesystem::path file = tmp / rank_file_name(k, json);
    if (json) {
        write_file_atomically(file, to_json_text(share_of(p, k)));
        return;
    }
    const std::string& prog = parts.programs[k];
    const std::string head = frame_head(1, parts.header.size() + prog.size(), fnv1a64(prog, header_sum));
    write_file_atomically(file, {head, parts.header, prog});
}

}  // namespace detail

/// Writes `p` as a plan directory at `dir` (see the file comment): rank files in binary, or
/// JSON with `json`, and the manifest, which holds `manifest` (a JSON object, e.g. the
/// planner's summary) plus format, version, iteration, ranks, plan_id and files. Stamps p.
/// With `threads` > 1 the programs are serialized and the rank files written on that many
/// threads (core/parallel.hpp); the files are the same bytes for every count.
inline void write_plan_directory(const std::filesystem::path& dir, execution_plan& p, bool json,
                                 nlohmann::json manifest = nlohmann::json::object(), std::size_t threads = 1) {
    namespace fs = std::filesystem;
    const auto [parent, name] = detail::split_dir(dir);
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw error("plan directory '" + dir.string() + "': cannot create '" + parent.string() + "': " + ec.message());
    const detail::dir_lock lock(parent, name, dir);
    const fs::path target = parent / name;
    const bool exists = detail::check_replaceable(target);
    detail::remove_stale_temporaries(parent, name);
    const binary_parts parts = stamp_identity(p, threads);
    std::string tmp = (parent / ("." + name + ".tmp.XXXXXX")).string();
    if (::mkdtemp(tmp.data()) == nullptr)
        throw error("plan directory '" + dir.string() + "': cannot create a temporary directory in '" + parent.string() +
                    "': " + std::strerror(errno));
    const ::mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(tmp.c_str(), 0777 & ~mask);
    try {
        const std::uint64_t header_sum = json ? 0 : fnv1a64(parts.header);
        parallel_for(p.programs.size(), threads,
                     [&](std::size_t k, std::size_t) { detail::write_rank_file(tmp, p, parts, header_sum, k, json); });
        nlohmann::json files = nlohmann::json::array();
        for (std::size_t k = 0; k < p.programs.size(); ++k) files.push_back(rank_file_name(k, json));
        manifest["format"] = plan_manifest_format;
        manifest["version"] = plan_format_version;
        manifest["iteration"] = p.header.iteration;
        manifest["ranks"] = p.programs.size();
        manifest["plan_id"] = plan_id_hex(p.header.plan_id);
        manifest["files"] = files;
        write_file_atomically(fs::path(tmp) / plan_manifest_name, manifest.dump(1) + "\n");
        detail::swap_into_place(tmp, target, exists);
    } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
    }
}

namespace detail {

/// The manifest's rank count, plan id and file names, checked.
struct manifest_view {
    std::size_t ranks = 0;
    std::string plan_id;
    std::vector<std::string> files;
};

[[nodiscard]] inline manifest_view read_manifest(const std::filesystem::path& path) {
    const std::string where = path.string();
    const std::string text = read_regular_file(path, regular_read_options{max_manifest_bytes, true});
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    const auto bad = [&](const std::string& field, const std::string& why) { return input_error(where, 0, field, why); };
    if (j.is_discarded() || !j.is_object()) throw bad("", "not a JSON object");
    if (j.value("format", "") != plan_manifest_format) throw bad("format", "expected \"" + std::string(plan_manifest_format) + "\"");
    if (!j.contains("ranks") || !j["ranks"].is_number_unsigned() || j["ranks"].get<std::uint64_t>() == 0 ||
        j["ranks"].get<std::uint64_t>() > (std::uint64_t(1) << 20))
        throw bad("ranks", "expected a rank count 1..1048576");
    manifest_view m;
    m.ranks = j["ranks"].get<std::size_t>();
    if (!j.contains("plan_id") || !j["plan_id"].is_string()) throw bad("plan_id", "expected the plan identity (16 hex digits)");
    m.plan_id = j["plan_id"].get<std::string>();
    if (!j.contains("files") || !j["files"].is_array() || j["files"].size() != m.ranks)
        throw bad("files", "expected one file name per rank (" + std::to_string(m.ranks) + ")");
    for (std::size_t k = 0; k < m.ranks; ++k) {
        const auto& f = j["files"][k];
        if (!f.is_string() || (f.get<std::string>() != rank_file_name(k, false) && f.get<std::string>() != rank_file_name(k, true)))
            throw bad("files[" + std::to_string(k) + "]", "expected \"" + rank_file_name(k, false) + "\" or \"" + rank_file_name(k, true) + "\"");
        m.files.push_back(f.get<std::string>());
    }
    return m;
}

}  // namespace detail

/// Reads the plan directory `dir` (see the file comment); the plan is not validated here.
[[nodiscard]] inline execution_plan read_plan_directory(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    const detail::manifest_view m = detail::read_manifest(dir / plan_manifest_name);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n != plan_manifest_name && std::find(m.files.begin(), m.files.end(), n) == m.files.end())
            throw input_error(e.path().string(), 0, "", "is not listed in the manifest '" + (dir / plan_manifest_name).string() +
                                                            "': not part of this plan (a stale or planted file)");
    }
    execution_plan out;
    for (std::size_t k = 0; k < m.ranks; ++k) {
        const fs::path path = dir / m.files[k];
        execution_plan one = read_plan_file(path);
        if (one.programs.size() != 1 || one.programs[0].rank != k)
            throw input_error(path.string(), 0, "programs", "expected the one program of rank " + std::to_string(k));
        if (plan_id_hex(one.header.plan_id) != m.plan_id)
            throw input_error(path.string(), 0, "header.plan_id", plan_id_hex(one.header.plan_id) + " is not the manifest's plan " +
                                                                      m.plan_id + ": the file belongs to another plan");
        if (k == 0) out.header = std::move(one.header);
        else if (!(one.header == out.header))
            throw input_error(path.string(), 0, "header", "differs from rank 0's header: the files belong to different plans");
        out.programs.push_back(std::move(one.programs[0]));
    }
    return out;
}

/// Whether `path` is a directory holding a plan manifest (plan-check / plan-show accept both).
[[nodiscard]] inline bool is_plan_directory(const std::filesystem::path& path) {
    std::error_code ec;
    return std::filesystem::is_directory(path, ec) && std::filesystem::exists(path / plan_manifest_name, ec);
}

}  // namespace pipeplan::plan
