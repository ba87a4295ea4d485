// TEMPORARY during development: replaced by the real subcommand.
#include "commands.hpp"
namespace pipeplan::cli {
void register_simulate(CLI::App& app) { app.add_subcommand("simulate", "(in development)"); }
}  // namespace pipeplan::cli
