// plan/export.hpp: the torch CSV (PyTorch's action grammar) and the Chrome trace, for dp 1 and 2.
#include <doctest/doctest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

TEST_CASE("export: torch CSV follows PyTorch's action grammar") {
    // _Action.from_str: (\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)
    const std::regex action(R"((\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*))");
    // _Action.from_str's sub-action form: (<action>;<action>)OVERLAP_F_B
    const std::regex overlap(R"(\(([^;()]+);([^;()]+)\)OVERLAP_F_B)");
    const auto sc = test::random_scenario(3, 4, 5);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const execution_plan p = test::sample_plan(c);
        for (bool comms : {false, true}) {
            const std::string csv = to_torch_csv(p, comms);
            std::istringstream in(csv);
            std::string row;
            std::size_t rank = 0, forwards = 0, backwards = 0, overlaps = 0;
            std::set<std::string> seen;
            while (std::getline(in, row)) {
                std::istringstream cells(row);
                std::string cell;
                while (std::getline(cells, cell, ',')) {
                    std::vector<std::string> parts{cell};
                    std::smatch pair;
                    if (std::regex_match(cell, pair, overlap)) parts = {pair[1], pair[2]};  // one action, two parts
                    for (const std::string& a : parts) {
                        std::smatch m;
                        REQUIRE_MESSAGE(std::regex_match(a, m, action), a);
                        const std::uint32_t stage = static_cast<std::uint32_t>(std::stoul(m[1]));
                        CHECK(p.header.device_of_stage(stage) == rank);  // every action on its stage's rank
                        const std::string t = m[2];
                        CHECK((t == "REDUCE_GRAD") == m[3].str().empty());
                        if (t == "F") ++forwards;
                        if (t == "B" || t == "I") ++backwards;
                        if (!comms) CHECK((t == "F" || t == "B" || t == "I" || t == "W"));
                        CHECK(seen.insert(a).second);  // no action twice
                    }
                    overlaps += parts.size() == 2;
                }
                ++rank;
            }
            CHECK(rank == p.header.devices);
            CHECK(forwards == c.sc.stages * c.sc.microbatches);   // one F per mb and stage (recompute folded)
            CHECK(backwards == c.sc.stages * c.sc.microbatches);
            std::size_t markers = 0;
            for (const auto& prog : p.programs)
                for (const auto& x : prog.instructions) markers += x.kind == instr_kind::overlap_f_b;
            CHECK(overlaps == markers);
        }
    }
    // golden: 1F1B on 2 stages, 2 micro-batches
    const auto sc2 = test::random_scenario(2, 2, 1);
    const execution_plan p = lower(sc2, schedule::one_f_one_b{}(sc2));
    CHECK(to_torch_csv(p, false) == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
    CHECK(to_torch_csv(p, true) ==
          "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0B0,0B1,0REDUCE_GRAD\n"
          "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD\n");
    // golden: the same with micro-batch 1's forward on stage 0 overlapped with micro-batch 0's
    // backward (PyTorch's sub-action form), whole backwards
    schedule::pipeline_schedule s2 = schedule::one_f_one_b{}(sc2);
    s2.orders[0] = {{schedule::op_kind::F, 0, 0}, {schedule::op_kind::F, 1, 0, true}, {schedule::op_kind::B, 0, 0},
                    {schedule::op_kind::B, 1, 0}};
    const execution_plan q = lower(sc2, s2);
    CHECK(validate(q).ok());
    CHECK(to_torch_csv(q, false) == "0F0,(0F1;0B0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n");
    CHECK(to_torch_csv(q, true).find(",(0F1;0B0)OVERLAP_F_B,") != std::string::npos);
    CHECK(execution_plan_from_binary(to_binary(q)) == q);
    CHECK(execution_plan_from_json(to_json_text(q)) == q);
}

TEST_CASE("export: Chrome trace has a track per rank and a flow per message") {
    const auto sc = test::random_scenario(3, 4, 6);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const execution_plan p = test::sample_plan(c);
        const auto sim = schedule::simulate(c.sc, c.sched);
        std::ostringstream os;
        write_plan_trace(os, p, sim);
        const auto j = nlohmann::json::parse(os.str());
        std::size_t threads = 0, flows_s = 0, flows_f = 0, slices = 0, sends = 0;
        for (const auto& e : j["traceEvents"]) {
            const std::string ph = e["ph"];
            threads += e["name"] == "thread_name";
            flows_s += ph == "s";
            flows_f += ph == "f";
            slices += ph == "X";
        }
        for (const auto& prog : p.programs)
            for (const auto& x : prog.instructions) sends += category(x.kind) == kind_category::send_start;
        CHECK(threads == p.header.devices);
        CHECK(flows_s == sends);
        CHECK(flows_f == sends);
        std::size_t ops = 0;
        for (const auto& o : c.sched.orders) ops += o.size();
        CHECK(slices == ops);
    }
}

TEST_CASE("export with dp > 1: a trace process per replica with every rank, a torch CSV per replica") {
    const analytic_cost_model model = make_analytic_model("gpt-6.7b");
    planner_options o;
    o.config.stages = 3;
    o.config.layers_per_stage = 4;
    o.config.tp = 2;
    o.config.dp = 2;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 4096;
    o.order_search_evaluations = 4;
    std::vector<batching::sample> batch;
    splitmix64 rng(21);
    for (int i = 0; i < 40; ++i)
        batch.push_back({.input_tokens = 32 + static_cast<int>(rng.below(900)), .target_tokens = 1 + static_cast<int>(rng.below(60))});
    const plan_result r = plan_iteration(model, batch, o);
    REQUIRE(r.plan.header.dp == 2);
    REQUIRE(r.simulations.size() == 2);
    std::ostringstream os;
    write_plan_trace(os, r.plan, r.simulations);
    const auto j = nlohmann::json::parse(os.str());
    std::set<std::pair<int, int>> tracks;  // (pid, tid) of the named tracks
    std::set<int> processes;
    std::size_t slices = 0, flows_s = 0, flows_f = 0;
    for (const auto& e : j["traceEvents"]) {
        if (e["name"] == "thread_name") tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
        if (e["name"] == "process_name") processes.insert(e["pid"].get<int>());
        const std::string ph = e["ph"];
        slices += ph == "X";
        flows_s += ph == "s";
        flows_f += ph == "f";
        if (ph == "X") CHECK(e["tid"].get<int>() / 3 == e["pid"].get<int>());  // rank r = replica * S + device
    }
    CHECK(processes == std::set<int>{0, 1});
    CHECK(tracks.size() == 6);
    for (int rank = 0; rank < 6; ++rank) CHECK(tracks.count({rank / 3, rank}) == 1);
    std::size_t ops = 0, sends = 0;
    for (const auto& prog : r.plan.programs)
        for (const auto& x : prog.instructions) {
            ops += is_compute(x.kind);
            sends += category(x.kind) == kind_category::send_start;
        }
    CHECK(slices == ops);
    CHECK(flows_s == sends);
    CHECK(flows_f == sends);
    CHECK_THROWS_AS(write_plan_trace(os, r.plan, r.simulation), pipeplan::invalid_argument);  // one simulation, 2 replicas

    // torch CSV: each replica's rows number its own micro-batches 0..n_k - 1
    for (std::uint32_t k = 0; k < 2; ++k) {
        const std::string csv = to_torch_csv(r.plan, false, k);
        std::size_t n_k = 0;
        for (const auto& m : r.plan.header.microbatches) n_k += m.replica == k;
        std::set<std::string> forwards_of_stage0;
        std::istringstream in(csv);
        std::string row;
        std::getline(in, row);
        std::istringstream cells(row);
        std::string a;
        while (std::getline(cells, a, ','))
            if (a.rfind("0F", 0) == 0) forwards_of_stage0.insert(a);
        CHECK(forwards_of_stage0.size() == n_k);
        for (std::size_t m = 0; m < n_k; ++m) CHECK(forwards_of_stage0.count("0F" + std::to_string(m)) == 1);
    }
    CHECK_THROWS_AS((void)to_torch_csv(r.plan, false, 2), pipeplan::invalid_argument);
    CHECK(replica_file_name("out/plan.csv", 1, 2) == "out/plan_r1.csv");
    CHECK(replica_file_name("out/plan.csv", 0, 1) == "out/plan.csv");
    CHECK(replica_file_name("out.d/plan", 3, 4) == "out.d/plan_r3");
    CHECK(replica_file_name(".hidden", 0, 2) == ".hidden_r0");
}
