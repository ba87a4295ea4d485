// pipeplan — plans pipeline-parallel training of variable-length inputs.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "pipeplan/core/error.hpp"

int main(int argc, char** argv) {
    CLI::App app{
        "pipeplan: cost models, micro-batch splitting and pipeline schedules for\n"
        "pipeline-parallel training on variable-length inputs.\n"
        "Run without a subcommand to print the built-in default cost model."};
    app.require_subcommand(0, 1);
    pipeplan::cli::register_cost(app);
    pipeplan::cli::register_calibrate(app);
    pipeplan::cli::register_split(app);
    pipeplan::cli::register_simulate(app);
    pipeplan::cli::register_run_cpu(app);
    pipeplan::cli::register_serve_plans(app);
    try {
        app.parse(argc, argv);
        if (app.get_subcommands().empty()) pipeplan::cli::run_default();
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const pipeplan::limit_exceeded& e) {
        std::fprintf(stderr, "pipeplan: error: %s\n", e.what());
        return 3;
    } catch (const pipeplan::error& e) {
        std::fprintf(stderr, "pipeplan: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pipeplan: internal error: %s\n", e.what());
        return 2;
    }
    return 0;
}
