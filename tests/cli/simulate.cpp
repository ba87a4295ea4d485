// CLI contract tests for `pipeplan simulate` (to be written with the subcommand).
#include <doctest/doctest.h>

#include "run_cli.hpp"
