// pipeplan/batching.hpp — micro-batch splitting (umbrella header; no JSON, no Eigen/Boost).
//
// Samples and padded shapes, the batch CSV reader, the pipeline configuration, stage-cost
// accounting, orderings, the exact range split and the splitter built on it, the baselines and
// data-parallel balancing. For JSON output include pipeplan/batching/json.hpp as well.
#pragma once

#include "pipeplan/batching/baselines.hpp"
#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/cost_cache.hpp"
#include "pipeplan/batching/dp_balance.hpp"
#include "pipeplan/batching/draw.hpp"
#include "pipeplan/batching/errors.hpp"
#include "pipeplan/batching/ordering.hpp"
#include "pipeplan/batching/packing.hpp"
#include "pipeplan/batching/range_split.hpp"
#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/result.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/batching/split_context.hpp"
#include "pipeplan/batching/exact_split.hpp"
#include "pipeplan/batching/stage_cost.hpp"
