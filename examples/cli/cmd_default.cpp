// TEMPORARY during development: replaced by the real main job.
#include "commands.hpp"
namespace pipeplan::cli {
void run_default() {}
}  // namespace pipeplan::cli
