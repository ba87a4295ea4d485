// Runs the built `pipeplan` executable for CLI contract tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace pipeplan::test {

struct cli_result {
    int exit_code = -1;
    std::string out;  ///< standard output
    std::string err;  ///< standard error
};

/// Runs `pipeplan <args...>` (arguments are shell-quoted) and captures both streams.
cli_result run_cli(const std::vector<std::string>& args);

/// As run_cli, with standard output sent to `stdout_path` (e.g. /dev/full); `out` stays empty.
cli_result run_cli_with_stdout(const std::vector<std::string>& args, const std::string& stdout_path);

/// Whether `s` contains `part` (error messages).
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A fresh temporary file path (not created) with the given suffix.
std::string temp_path(const std::string& suffix);

/// The whole content of the file at `path` (empty when it cannot be read).
std::string read_text_file(const std::string& path);

/// A fresh folder under the temp directory, removed (with its content) at the end of its scope.
struct temp_dir {
    std::filesystem::path path = temp_path(".d");
    temp_dir() { std::filesystem::create_directories(path); }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    /// The path of `name` in the folder.
    [[nodiscard]] std::string operator/(const std::string& name) const { return (path / name).string(); }
    /// Writes `text` to `name` in the folder; returns its path.
    [[nodiscard]] std::string file(const std::string& name, const std::string& text) const {
        const std::string p = *this / name;
        std::ofstream(p, std::ios::binary) << text;
        return p;
    }
};

}  // namespace pipeplan::test
