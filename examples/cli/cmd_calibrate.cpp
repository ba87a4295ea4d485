// TEMPORARY during development: replaced by the real subcommand.
#include "commands.hpp"
namespace pipeplan::cli {
void register_calibrate(CLI::App& app) { app.add_subcommand("calibrate", "(in development)"); }
}  // namespace pipeplan::cli
