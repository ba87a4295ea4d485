// CLI contract tests for `pipeplan` (no arguments) and `pipeplan calibrate`.
#include <doctest/doctest.h>

#include "run_cli.hpp"
