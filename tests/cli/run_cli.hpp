// Runs the built `pipeplan` executable for CLI contract tests.
#pragma once

#include <string>
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

/// A fresh temporary file path (not created) with the given suffix.
std::string temp_path(const std::string& suffix);

/// The whole content of the file at `path` (empty when it cannot be read).
std::string read_text_file(const std::string& path);

}  // namespace pipeplan::test
