// TEMPORARY during development: replaced by the real subcommand.
#include "commands.hpp"
namespace pipeplan::cli {
void register_cost(CLI::App& app) { app.add_subcommand("cost", "(in development)"); }
}  // namespace pipeplan::cli
