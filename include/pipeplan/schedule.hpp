// pipeplan/schedule.hpp — the schedule tier: pipeline schedules, the event simulator, lower
// bounds, order search, trace and SVG output. No third-party dependency; the JSON I/O
// (pipeplan/schedule/scenario_json.hpp, nlohmann-json) is included separately.
#pragma once

#include "pipeplan/schedule/adaptive.hpp"
#include "pipeplan/schedule/dualpipe_v.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/gpipe.hpp"
#include "pipeplan/schedule/interleaved.hpp"
#include "pipeplan/schedule/links.hpp"
#include "pipeplan/schedule/lower_bound.hpp"
#include "pipeplan/schedule/memory_bound.hpp"
#include "pipeplan/schedule/merak.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"
#include "pipeplan/schedule/op_graph.hpp"
#include "pipeplan/schedule/op.hpp"
#include "pipeplan/schedule/order_discovery.hpp"
#include "pipeplan/schedule/order_search.hpp"
#include "pipeplan/schedule/orders_text.hpp"
#include "pipeplan/schedule/placement.hpp"
#include "pipeplan/schedule/registry.hpp"
#include "pipeplan/schedule/scenario.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/svg.hpp"
#include "pipeplan/schedule/timing.hpp"
#include "pipeplan/schedule/trace.hpp"
#include "pipeplan/schedule/zero_bubble.hpp"
#include "pipeplan/schedule/zero_bubble_v.hpp"
