// pipeplan/partition/json.hpp — nlohmann-json serialisation of partitioning results (ADL to_json).
//
// Keys (docs/formats.md): pipedream_result → levels [{level, workers, bandwidth_bytes_per_s,
// time_per_minibatch_s, bottleneck_stage_s, stages [{start, end, replicas, compute_s, comm_s,
// transfer_s}]}] (lowest level first; the last is the top level), time_per_minibatch_s,
// data_parallel_s, single_worker_s, speedup_over_dp, states.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeplan/partition/pipedream.hpp"

namespace pipeplan::partition {

inline void to_json(nlohmann::json& j, const pipedream_stage& s) {
    j = nlohmann::json{{"start", s.start},         {"end", s.end},       {"replicas", s.replicas},
                       {"compute_s", s.compute_s}, {"comm_s", s.comm_s}, {"transfer_s", s.transfer_s}};
}

inline void to_json(nlohmann::json& j, const pipedream_level& l) {
    j = nlohmann::json{{"level", l.level},
                       {"workers", l.workers},
                       {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                       {"time_per_minibatch_s", l.time_per_minibatch_s},
                       {"bottleneck_stage_s", l.bottleneck_stage_s},
                       {"stages", l.stages}};
}

inline void to_json(nlohmann::json& j, const pipedream_result& r) {
    j = nlohmann::json{{"levels", r.levels},
                       {"time_per_minibatch_s", r.time_per_minibatch_s},
                       {"data_parallel_s", r.data_parallel_s},
                       {"single_worker_s", r.single_worker_s},
                       {"speedup_over_dp", r.speedup_over_dp()},
                       {"states", r.states}};
}

}  // namespace pipeplan::partition
