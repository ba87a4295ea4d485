// pipeplan/partition/json.hpp — nlohmann-json serialisation of partitioning results (ADL to_json).
//
// Keys (docs/formats.md): pipedream_result → levels [{level, workers, bandwidth_bytes_per_s,
// time_per_minibatch_s, bottleneck_stage_s, stages [{start, end, replicas, compute_s, comm_s,
// transfer_s}]}] (lowest level first; the last is the top level), time_per_minibatch_s,
// data_parallel_s, single_worker_s, speedup_over_dp, states. Times are in seconds there, as
// PipeDream prints them: the result's ms / 1000.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeplan/partition/pipedream.hpp"

namespace pipeplan::partition {

namespace detail {
[[nodiscard]] inline double json_seconds(double ms) { return ms / 1000.0; }
}  // namespace detail

inline void to_json(nlohmann::json& j, const pipedream_stage& s) {
    j = nlohmann::json{{"start", s.start},
                       {"end", s.end},
                       {"replicas", s.replicas},
                       {"compute_s", detail::json_seconds(s.compute_ms)},
                       {"comm_s", detail::json_seconds(s.comm_ms)},
                       {"transfer_s", detail::json_seconds(s.transfer_ms)}};
}

inline void to_json(nlohmann::json& j, const pipedream_level& l) {
    j = nlohmann::json{{"level", l.level},
                       {"workers", l.workers},
                       {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                       {"time_per_minibatch_s", detail::json_seconds(l.time_per_minibatch_ms)},
                       {"bottleneck_stage_s", detail::json_seconds(l.bottleneck_stage_ms)},
                       {"stages", l.stages}};
}

inline void to_json(nlohmann::json& j, const pipedream_result& r) {
    j = nlohmann::json{{"levels", r.levels},
                       {"time_per_minibatch_s", detail::json_seconds(r.time_per_minibatch_ms)},
                       {"data_parallel_s", detail::json_seconds(r.data_parallel_ms)},
                       {"single_worker_s", detail::json_seconds(r.single_worker_ms)},
                       {"speedup_over_dp", r.speedup_over_dp()},
                       {"states", r.states}};
}

}  // namespace pipeplan::partition
