#include "run_cli.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipeplan::test {

namespace {
std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') q += "'\\''";
        else q += c;
    }
    return q + "'";
}
}  // namespace

std::string read_text_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string temp_path(const std::string& suffix) {
    static std::atomic<int> counter{0};
    return (std::filesystem::temp_directory_path() /
            ("pipeplan_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + suffix))
        .string();
}

namespace {
cli_result run(const std::vector<std::string>& args, const std::string* stdout_path) {
    const std::string out_path = stdout_path ? *stdout_path : temp_path(".out"), err_path = temp_path(".err");
    std::string cmd = quote(PIPEPLAN_CLI_PATH);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote(out_path) + " 2>" + quote(err_path) + " </dev/null";
    const int status = std::system(cmd.c_str());
    cli_result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (!stdout_path) {
        r.out = read_text_file(out_path);
        std::filesystem::remove(out_path);
    }
    r.err = read_text_file(err_path);
    std::filesystem::remove(err_path);
    return r;
}
}  // namespace

cli_result run_cli(const std::vector<std::string>& args) { return run(args, nullptr); }

cli_result run_cli_with_stdout(const std::vector<std::string>& args, const std::string& stdout_path) {
    return run(args, &stdout_path);
}

}  // namespace pipeplan::test
