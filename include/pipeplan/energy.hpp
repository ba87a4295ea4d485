// pipeplan/energy.hpp — the energy tier: time–energy profiles (CSV, A100 DVFS model), the
// computation DAG of a schedule, Perseus's iteration time–energy frontier by Phillips–Dessouky
// min cuts, and per-computation frequency plans. Needs Boost.Graph (max-flow).
#pragma once

#include "pipeplan/energy/frontier.hpp"
#include "pipeplan/energy/frequency_plan.hpp"
#include "pipeplan/energy/min_cut.hpp"
#include "pipeplan/energy/problem.hpp"
#include "pipeplan/energy/profile.hpp"
