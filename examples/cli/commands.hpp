// The `pipeplan` command-line tool: each subcommand lives in its own cmd_*.cpp and registers
// itself on the CLI11 app. Errors are thrown (pipeplan::error) and reported by main().
#pragma once

#include <CLI/CLI.hpp>

namespace pipeplan::cli {

/// `pipeplan cost ...` (cmd_cost.cpp)
void register_cost(CLI::App& app);
/// `pipeplan calibrate ...` (cmd_calibrate.cpp)
void register_calibrate(CLI::App& app);
/// `pipeplan split ...` (cmd_split.cpp)
void register_split(CLI::App& app);
/// `pipeplan simulate ...` (cmd_simulate.cpp)
void register_simulate(CLI::App& app);
/// `pipeplan plan`, `plan-check`, `plan-show` (cmd_plan.cpp)
void register_plan(CLI::App& app);
/// The main job's last part: one iteration planned end to end on built-in defaults (cmd_plan.cpp).
void print_default_plan();
/// `pipeplan compare ...` (cmd_compare.cpp)
void register_compare(CLI::App& app);
/// `pipeplan partition ...` (cmd_partition.cpp)
void register_partition(CLI::App& app);
/// `pipeplan shard ...` (cmd_shard.cpp)
void register_shard(CLI::App& app);
/// `pipeplan energy ...` (cmd_energy.cpp)
void register_energy(CLI::App& app);
/// `pipeplan run-cpu ...` (cmd_runtime.cpp)
void register_run_cpu(CLI::App& app);
/// `pipeplan serve-plans ...` (cmd_runtime.cpp)
void register_serve_plans(CLI::App& app);
/// `pipeplan fetch-plan ...` (cmd_runtime.cpp)
void register_fetch_plan(CLI::App& app);
/// `pipeplan` with no subcommand: the main job on built-in defaults (cmd_default.cpp).
void run_default();

}  // namespace pipeplan::cli
