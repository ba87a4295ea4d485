// pipeplan/core/file.hpp — writing output files so that nothing is ever half-written and
// nothing but the named file is touched.
//
//   write_file_atomically(path, text)  a regular file: temporary file beside the real target
//                                      (symlinks followed), then renamed over it
//   write_output_file(path, text)      any output argument: "-" is standard output, character
//                                      devices and FIFOs are streamed to, everything else goes
//                                      through write_file_atomically
//
//   read_text_file(path)               the bytes of an input file (one reader for every parser)
//
// Every write, the final flush and the close are checked; errors throw pipeplan::error naming
// the path and the reason (errno's text).
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeplan/core/error.hpp"

namespace pipeplan {

namespace detail {

[[noreturn]] inline void throw_file_error(const std::filesystem::path& path, const std::string& why) {
    throw error("cannot write '" + path.string() + "': " + why);
}

/// Writes all of `text` to `fd`, retrying short writes and EINTR. Returns 0 or an errno value.
[[nodiscard]] inline int write_all(int fd, std::string_view text) noexcept {
    while (!text.empty()) {
        const ::ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
}

/// write_all of each piece in turn.
[[nodiscard]] inline int write_all(int fd, std::initializer_list<std::string_view> pieces) noexcept {
    for (const std::string_view piece : pieces)
        if (const int err = write_all(fd, piece); err != 0) return err;
    return 0;
}

/// The path a symlink chain ends in (the path itself when it is not a symlink). A dangling link
/// resolves to the missing target, so that the target is created and the link kept.
[[nodiscard]] inline std::filesystem::path resolve_symlinks(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    fs::path p = path;
    for (int hops = 0;; ++hops) {
        std::error_code ec;
        if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
        if (hops == 40) throw_file_error(path, "too many levels of symbolic links");
        const fs::path target = fs::read_symlink(p, ec);
        if (ec) throw_file_error(path, ec.message());
        p = target.is_absolute() ? target : p.parent_path() / target;
    }
}

/// True when `st` is the file standard output is connected to.
[[nodiscard]] inline bool is_standard_output(const struct ::stat& st) noexcept {
    struct ::stat out {};
    return ::fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == st.st_dev && out.st_ino == st.st_ino;
}

}  // namespace detail

/// The whole content of the input file `path`. Throws input_error(path, 0, ...) when it is a
/// directory, cannot be opened (errno's reason) or a read fails; there is no size limit beyond
/// memory, and the bytes are returned as they are (the parsers check the content).
[[nodiscard]] inline std::string read_text_file(const std::filesystem::path& path) {
    struct ::stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw input_error(path.string(), 0, "", "is a directory, expected a file");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw input_error(path.string(), 0, "", std::string("cannot open file: ") + std::strerror(errno));
    std::string text;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        text.reserve(static_cast<std::size_t>(st.st_size));
    char buf[1 << 16];
    for (;;) {
        const ::ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            throw input_error(path.string(), 0, "", std::string("read failed: ") + std::strerror(err));
        }
        if (n == 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
}

/// What a file that is not a regular one is, for messages ("a directory", "a FIFO", ...).
[[nodiscard]] inline const char* file_kind(::mode_t mode) noexcept {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

/// Options of read_regular_file.
struct regular_read_options {
    std::uint64_t max_bytes = std::uint64_t(1) << 30;  ///< larger files are refused unread
    bool follow_symlinks = true;                         ///< false: a symlink at `path` is refused
};

/// The whole content of the regular file `path`, never blocking on a FIFO nor reading an endless
/// device: the file is opened without blocking, and anything but a regular file (a directory,
/// FIFO, device, socket; a symlink unless followed) is refused, as is a file over
/// `o.max_bytes` (also one that grows past it while read). Throws input_error(path, 0, ...)
/// saying what the path is.
[[nodiscard]] inline std::string read_regular_file(const std::filesystem::path& path, const regular_read_options& o = {}) {
    const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (o.follow_symlinks ? 0 : O_NOFOLLOW);
    const int fd = ::open(path.c_str(), flags);
    if (fd < 0) {
        const int err = errno;
        struct ::stat lst {};
        if (err == ELOOP && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
            throw input_error(path.string(), 0, "", "is a symbolic link, expected a regular file (links are not followed here)");
        throw input_error(path.string(), 0, "", std::string("cannot open file: ") + std::strerror(err));
    }
    struct ::stat st {};
    const auto fail = [&](const std::string& why) {
        ::close(fd);
        throw input_error(path.string(), 0, "", why);
    };
    if (::fstat(fd, &st) != 0) fail(std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(std::string("is ") + file_kind(st.st_mode) + ", expected a regular file");
    if (static_cast<std::uint64_t>(st.st_size) > o.max_bytes)
        fail("holds " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(o.max_bytes) + " accepted");
    std::string text;
    text.reserve(static_cast<std::size_t>(st.st_size));
    char buf[1 << 16];
    for (;;) {
        const ::ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(std::string("read failed: ") + std::strerror(errno));
        if (n == 0) break;
        if (text.size() + static_cast<std::size_t>(n) > o.max_bytes)
            fail("grew past the " + std::to_string(o.max_bytes) + " bytes accepted while being read");
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
}

/// Writes `text` (or the concatenation of `pieces`, never copied into one string) to the
/// regular file `path` atomically: into a temporary file in the folder of
/// the real target (a symlink is followed, and stays a symlink), then renamed over the target.
/// A new file gets the usual 0666 & ~umask permissions, a replaced one keeps its permissions.
/// On failure the target is untouched, the temporary file is removed, and pipeplan::error names
/// the path and the reason. A target that exists but is not a regular file is an error (see
/// write_output_file for devices and FIFOs).
/// With `follow_symlinks` false a symlink at `path` is refused instead (stores: a planted link
/// must not redirect a write; the rename itself never follows one).
inline void write_file_atomically(const std::filesystem::path& path, std::initializer_list<std::string_view> pieces,
                                  bool follow_symlinks = true) {
    namespace fs = std::filesystem;
    if (path.empty()) throw error("cannot write '': empty file name");
    const fs::path target = follow_symlinks ? detail::resolve_symlinks(path) : path;
    struct ::stat st {};
    ::mode_t mode = 0;
    if (!follow_symlinks && ::lstat(target.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        detail::throw_file_error(path, "is a symbolic link; refusing to write through or replace it");
    if (::stat(target.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) detail::throw_file_error(path, "is a directory");
        if (!S_ISREG(st.st_mode)) detail::throw_file_error(path, "is not a regular file");
        mode = st.st_mode & 07777;
    } else {
        const ::mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
    }
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) detail::throw_file_error(path, std::string("cannot create a temporary file in '") + dir.string() +
                                                   "': " + std::strerror(errno));
    const auto fail = [&](int err, const char* what) {
        ::unlink(tmp.c_str());
        detail::throw_file_error(path, std::string(what) + std::strerror(err));
    };
    int err = detail::write_all(fd, pieces);
    if (err == 0 && ::fchmod(fd, mode) != 0) err = errno;
    if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) fail(err, "");
    if (::rename(tmp.c_str(), target.c_str()) != 0) fail(errno, "cannot replace the file: ");
}
inline void write_file_atomically(const std::filesystem::path& path, std::string_view text, bool follow_symlinks = true) {
    write_file_atomically(path, {text}, follow_symlinks);
}

/// Writes `text` to the output argument `path` the way a command-line user expects:
///  - "-": standard output (flushed first, every write checked);
///  - an existing character device or FIFO (also through symlinks, e.g. /dev/stdout): opened
///    for writing and streamed to, never replaced;
///  - a regular file or a new name: write_file_atomically;
///  - anything else (a directory, a socket, a block device): an error.
/// Throws pipeplan::error naming the path and the reason; a failed write or close (a full
/// device, a closed pipe) is an error too.
inline void write_output_file(const std::filesystem::path& path, std::string_view text) {
    struct ::stat st {};
    const bool exists = !path.empty() && ::stat(path.c_str(), &st) == 0;
    if (path == "-" || (exists && detail::is_standard_output(st))) {
        // Standard output itself (also /dev/stdout when it is redirected to a file): write to
        // the descriptor the caller was given, after whatever stdio has buffered.
        const std::string name = path == "-" ? std::string("<standard output>") : path.string();
        if (std::fflush(stdout) != 0) detail::throw_file_error(name, std::strerror(errno));
        if (const int err = detail::write_all(STDOUT_FILENO, text); err != 0)
            detail::throw_file_error(name, std::strerror(err));
        return;
    }
    if (!exists || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
        write_file_atomically(path, text);
        return;
    }
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
        detail::throw_file_error(path, "is not a regular file, character device or FIFO");
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) detail::throw_file_error(path, std::strerror(errno));
    int err = detail::write_all(fd, text);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) detail::throw_file_error(path, std::strerror(err));
}

/// True when the output argument `path` is standard output ("-", or a path to the same file,
/// e.g. /dev/stdout): a command then prints its summary on standard error instead.
[[nodiscard]] inline bool is_standard_output_path(const std::filesystem::path& path) noexcept {
    if (path == "-") return true;
    struct ::stat st {};
    return !path.empty() && ::stat(path.c_str(), &st) == 0 && detail::is_standard_output(st);
}

}  // namespace pipeplan
