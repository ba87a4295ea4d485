// TEMPORARY during development: replaced by the real subcommand.
#include "commands.hpp"
namespace pipeplan::cli {
void register_split(CLI::App& app) { app.add_subcommand("split", "(in development)"); }
}  // namespace pipeplan::cli
