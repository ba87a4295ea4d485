// CLI contract tests for `pipeplan split` (to be written with the subcommand).
#include <doctest/doctest.h>

#include "run_cli.hpp"
