// pipeplan/partition.hpp — the partition tier: layer graphs (Boost.Graph, PipeDream's
// graph.txt), PipeDream's hierarchical optimizer, 1F1B-RR with weight stashing, and Merak-style
// sharding of transformers. Needs Boost.Graph; the JSON output
// (pipeplan/partition/json.hpp, nlohmann-json) is included separately.
#pragma once

#include "pipeplan/partition/antichain.hpp"
#include "pipeplan/partition/layer_graph.hpp"
#include "pipeplan/partition/one_f_one_b_rr.hpp"
#include "pipeplan/partition/pipedream.hpp"
#include "pipeplan/partition/transformer.hpp"
