// Tests of pipeplan/schedule/timing.hpp's data-flow rules and op_index.hpp's lookups: producers
// and successors are inverses on every schedule, input_count() counts the producers, and the
// lowering to rank programs (plan/lower.hpp) and the simulator read the same edges.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/op_index.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::random_scenario;

namespace {

/// Every built-in schedule (and Merak with a checkpoint ratio: f and R ops) on `sc`.
std::vector<std::pair<scenario, pipeline_schedule>> schedules_of(const scenario& sc) {
    std::vector<std::pair<scenario, pipeline_schedule>> out;
    for (const auto& row : builtin_schedules()) {
        named_schedule_options o;
        if (row.checkpoint_rule) o.checkpoint_ratio = 0.5;
        const scenario p = prepare_scenario(row, sc, o);
        out.emplace_back(p, make_generator(row, o)(p));
    }
    return out;
}

}  // namespace

TEST_CASE("timing: producers and successors are inverse; input_count counts the producers") {
    for (std::uint64_t seed = 1; seed <= 3; ++seed)
        for (const auto& item : schedules_of(random_scenario(4, 7, seed))) {
            const scenario& sc = item.first;
            const pipeline_schedule& s = item.second;
            INFO(s.name << ", seed " << seed);
            op_index idx;
            idx.build(sc, s);
            std::vector<int> inputs(idx.ops.size(), 0);
            for (std::size_t i = 0; i < idx.ops.size(); ++i) {
                const op o = idx.ops[i];
                const auto id = static_cast<std::int32_t>(i);
                if (const std::int32_t c = idx.cross_successor_of(o); c != op_index::none) {
                    CHECK(idx.cross_producer_of(idx.ops[static_cast<std::size_t>(c)]) == id);
                    CHECK(idx.ops[static_cast<std::size_t>(c)].microbatch == o.microbatch);
                    ++inputs[static_cast<std::size_t>(c)];
                }
                if (const std::int32_t l = idx.local_successor_of(o); l != op_index::none) {
                    CHECK(idx.local_producer_of(idx.ops[static_cast<std::size_t>(l)]) == id);
                    CHECK(idx.ops[static_cast<std::size_t>(l)].stage == o.stage);
                    ++inputs[static_cast<std::size_t>(l)];
                }
                const int producers = (idx.cross_producer_of(o) != op_index::none ? 1 : 0) +
                                      (idx.local_producer_of(o) != op_index::none ? 1 : 0);
                CHECK(producers == input_count(o, sc.stages));
            }
            // Every op is fed by exactly as many successor edges as it has producers.
            for (std::size_t i = 0; i < idx.ops.size(); ++i) CHECK(inputs[i] == input_count(idx.ops[i], sc.stages));
        }
}

TEST_CASE("timing: the simulator's graph has the producers' edges (op_graph)") {
    for (const auto& item : schedules_of(random_scenario(3, 5, 9))) {
        const scenario& sc = item.first;
        const pipeline_schedule& s = item.second;
        INFO(s.name);
        const op_graph g = make_op_graph(sc, s);
        op_index idx;
        idx.build(sc, s);
        const std::size_t order_edges = g.size() - g.devices();  // listed first (every device has ops)
        std::size_t data_edges = 0;
        for (std::size_t k = order_edges; k < g.edges.size(); ++k) {
            const auto& e = g.edges[k];
            const op& to = g.ops[e.to];
            const auto from = static_cast<std::int32_t>(e.from);
            ++data_edges;
            CHECK((idx.cross_producer_of(to) == from || idx.local_producer_of(to) == from));
        }
        std::size_t inputs = 0;
        for (const op& o : g.ops) inputs += input_count(o, sc.stages);
        CHECK(data_edges == inputs);
    }
}
