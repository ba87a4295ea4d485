// pipeplan/core/file.hpp — reading input files whole, and writing output files so that nothing
// is ever half-written.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <unistd.h>

#include "pipeplan/core/error.hpp"

namespace pipeplan {

/// The whole content of the file at `path`; throws input_error(path, 0, "", "cannot open
/// file") when it cannot be read.
[[nodiscard]] inline std::string read_text_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw input_error(path.string(), 0, "", "cannot open file");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Writes `text` to `path` atomically: into a temporary file beside it, then renamed over the
/// target. On failure the target is untouched, the temporary file is removed, and
/// pipeplan::error names the path and the reason.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
    namespace fs = std::filesystem;
    fs::path tmp = path;
    tmp += ".tmp." + std::to_string(::getpid());
    const auto fail = [&](const std::string& why) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw error("cannot write '" + path.string() + "': " + why);
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw error("cannot write '" + path.string() + "' (cannot create " + tmp.string() + ")");
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.flush();
        if (!out) {
            out.close();
            fail("write failed");
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) fail(ec.message());
}

}  // namespace pipeplan
