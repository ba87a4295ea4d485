// pipeplan — plans pipeline-parallel training of variable-length inputs.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "pipeplan/core/error.hpp"

int main(int argc, char** argv) {
    CLI::App app{
        "pipeplan: cost models, micro-batch splitting and pipeline schedules for\n"
        "pipeline-parallel training on variable-length inputs.\n"
        "Run without a subcommand for the main job: the built-in default cost model, then one\n"
        "iteration planned end to end (split, schedule choice, execution plans) with its summary."};
    app.require_subcommand(0, 1);
    pipeplan::cli::register_cost(app);
    pipeplan::cli::register_calibrate(app);
    pipeplan::cli::register_split(app);
    pipeplan::cli::register_simulate(app);
    pipeplan::cli::register_plan(app);
    pipeplan::cli::register_compare(app);
    pipeplan::cli::register_partition(app);
    pipeplan::cli::register_shard(app);
    pipeplan::cli::register_energy(app);
    pipeplan::cli::register_run_cpu(app);
    pipeplan::cli::register_serve_plans(app);
    pipeplan::cli::register_fetch_plan(app);
    try {
        app.parse(argc, argv);
        if (app.get_subcommands().empty()) pipeplan::cli::run_default();
    } catch (const CLI::ParseError& e) {
        // --help exits 0; every usage error (CLI11's own codes 100-115) exits 1.
        return app.exit(e) == 0 ? 0 : 1;
    } catch (const pipeplan::limit_exceeded& e) {
        std::fprintf(stderr, "pipeplan: error: %s\n", e.what());
        return 3;
    } catch (const pipeplan::option_error& e) {  // the library names its option; the user knows the flag
        std::fprintf(stderr, "pipeplan: error: %s\n", e.named(pipeplan::cli::flag_of_option(e.option())).c_str());
        return 1;
    } catch (const pipeplan::error& e) {
        std::fprintf(stderr, "pipeplan: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pipeplan: internal error: %s\n", e.what());
        return 2;
    }
    // A summary lost to a full device or a closed pipe is an error, not a success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "pipeplan: error: cannot write standard output: %s\n",
                     errno != 0 ? std::strerror(errno) : "write error");
        return 1;
    }
    return 0;
}
