// Simulator details, lower bounds, order search, scenario JSON, trace and SVG output.
#include <doctest/doctest.h>

#include <cstring>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::check_schedule;
using pipeplan::test::random_scenario;

namespace {
scenario two_stage(double act_mb, network_model nw) {
    // Stage 0 forward 1 ms, stage 1 forward 2 ms, backward 2x, two micro-batches.
    return make_scenario({{1, 2}, {1, 2}}, {{2, 4}, {2, 4}}, {{10, 10}, {10, 10}}, {{20, 20}, {20, 20}}, {100, 100},
                         {act_mb, act_mb}, nw);
}
std::string error_of(const std::string& text) {
    try {
        (void)parse_scenario_json(text, "s.json");
    } catch (const pipeplan::input_error& e) {
        return e.what();
    }
    return "";
}
const char* good_json = R"({
  "stages": 2,
  "microbatches": [
    {"forward_ms": [1, 2], "backward_ms": [2, 4], "stored_mb": [10, 10], "peak_mb": [20, 20]},
    {"forward_ms": [1, 2], "backward_ms": [2, 4], "stored_mb": [10, 10], "peak_mb": [20, 25]}
  ],
  "model_state_mb": [100, 100],
  "network": {"latency_ms": 0.5, "bandwidth_gbps": 8, "activation_mb": [5, 5]}
})";
/// S = 3, M = 4 equal micro-batches (forward 1, backward 2 ms; model 100, stored 10, peak 20 MB).
scenario uniform_scenario_for_limits() { return pipeplan::test::uniform_scenario(3, 4); }
}  // namespace

TEST_CASE("simulator: latency and per-link bandwidth (messages queue on a link)") {
    network_model nw;
    nw.latency_ms = 0.5;
    nw.bandwidth_gbps = 8.0;  // 5 MB -> 5 ms on the wire
    const scenario sc = two_stage(5.0, nw);
    const auto r = check_schedule(sc, gpipe{}(sc));
    // F0 on s0 ends at 1, wire 1..6, arrives 6.5; F1 ends at 2, waits for the link until 6,
    // arrives 11.5.
    CHECK(r.timeline[1][0].start_ms == doctest::Approx(6.5));
    CHECK(r.timeline[1][1].start_ms == doctest::Approx(11.5));
    // Free network: pure dependencies.
    const scenario free = two_stage(5.0, {});
    const auto f = simulate(free, gpipe{});
    CHECK(f.timeline[1][0].start_ms == doctest::Approx(1.0));
    CHECK(f.makespan_ms == doctest::Approx(15.0));  // s1: F 1-5, B 5-13; s0: B1 13-15
    // Intra-node links use the intra-node figures.
    network_model node = nw;
    node.devices_per_node = 2;
    const auto n = simulate(two_stage(5.0, node), gpipe{});
    CHECK(n.timeline[1][0].start_ms == doctest::Approx(1.0));
}

TEST_CASE("simulator: memory model (stored, peak, checkpoints, W residual)") {
    const scenario sc = two_stage(5.0, {});
    const auto r = simulate(sc, gpipe{});
    // Stage 0: F0 (peak 20), holds 10; F1 holds 20 total, peak 10 + 20; B0: 10 + 20.
    CHECK(r.peak_memory_mb[0] == doctest::Approx(100 + 10 + 20));
    CHECK(r.memory_mb[0].front().memory_mb == doctest::Approx(100));
    CHECK(r.memory_mb[0].back().memory_mb == doctest::Approx(100));
    // A checkpointed forward keeps only activation_mb.
    pipeline_schedule s{"ck", stage_placement::linear(2),
                        {{{op_kind::f, 0, 0}, {op_kind::f, 1, 0}, {op_kind::R, 0, 0}, {op_kind::B, 0, 0}, {op_kind::B, 1, 0}},
                         {{op_kind::F, 0, 1}, {op_kind::B, 0, 1}, {op_kind::F, 1, 1}, {op_kind::B, 1, 1}}},
                        0.0};
    const auto c = check_schedule(sc, s);
    // After f0 f1: 100 + 5 + 5; R0 runs with 105 + 20 = 125 (f1's checkpoint + R0's peak).
    CHECK(c.peak_memory_mb[0] == doctest::Approx(125));
    // B1 recomputes inline: forward + backward time.
    const auto& last = c.timeline[0].back();
    CHECK(last.end_ms - last.start_ms == doctest::Approx(1 + 2));
}

TEST_CASE("simulator: malformed schedules are rejected") {
    const scenario sc = two_stage(0.0, {});
    pipeline_schedule s = one_f_one_b{}(sc);
    auto bad = s;
    std::swap(bad.orders[1][0], bad.orders[1][1]);  // B0 before F0 on the last stage
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("deadlocks"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].pop_back();
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("has no B op"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].push_back(bad.orders[0].front());
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("twice"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].front().stage = 1;
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("device 1"), pipeplan::invalid_argument);
}

TEST_CASE("lower bound: parts and validity") {
    const scenario sc = scaled_scenario({4, 4, 2, 2}, {1, .8, 1.2, .9, 1.1, .7, 1.4, .6}, 2.0, 4000, 8000, 16000);
    const auto lb = lower_bound(sc, stage_placement::linear(4));
    // Stage 1: fill 4·0.6 + work 12·7.7 + drain 8·0.6 = 99.6.
    CHECK(lb.device_bound_ms[1] == doctest::Approx(99.6));
    CHECK(lb.device_bound_ms[0] == doctest::Approx(92.4));
    CHECK(lb.longest_path_ms == doctest::Approx(12 * 1.4 * 3));
    CHECK(lb.bound_ms == doctest::Approx(99.6));
    // Holds for every schedule (checked by check_schedule on random scenarios); brute force
    // over all orders of a small scenario never beats it.
    const scenario small = random_scenario(3, 4, 5);
    std::vector<std::uint32_t> order{0, 1, 2, 3};
    const double bound = lower_bound(small, stage_placement::linear(3)).bound_ms;
    do {
        const scenario r = reorder(small, order);
        for (const auto& gen : {any_generator(one_f_one_b{}), any_generator(adaptive{}), any_generator(gpipe{})})
            CHECK(simulate(r, gen).makespan_ms >= bound - 1e-9);
    } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("order search: deterministic, within the limit, better than random permutations") {
    const scenario sc = random_scenario(4, 25, 2024);
    const double limit = 1000.0 + 5.0 * 2.0 * 100.0 * 2.0;
    order_search_options opt;
    opt.memory_limit_mb = limit;
    opt.seed = 7;
    opt.search_inflight_limit = true;
    auto factory = [](std::size_t l) {
        adaptive a;
        a.memory_limit_mb = 1000.0 + 5.0 * 2.0 * 100.0 * 2.0;
        a.inflight_limit = l;
        a.search_preferences = false;
        return a;
    };
    const auto a = search_order_with(sc, factory, opt);
    const auto b = search_order_with(sc, factory, opt);
    REQUIRE(a.feasible);
    CHECK(a.order == b.order);
    CHECK(a.makespan_ms == b.makespan_ms);
    CHECK(a.inflight_limit == b.inflight_limit);
    CHECK(a.peak_memory_mb <= limit + 1e-6);
    // The reported makespan and peak are what the chosen order and limit give (the search took
    // the makespan from adaptive's replay_facts and simulated the winner for its peak).
    auto gen = factory(a.inflight_limit);
    const scenario r = reorder(sc, a.order);
    const simulation_result chosen = simulate(r, gen);
    CHECK(chosen.makespan_ms == a.makespan_ms);
    CHECK(*std::max_element(chosen.peak_memory_mb.begin(), chosen.peak_memory_mb.end()) == a.peak_memory_mb);
    order_search_options no_peak = opt;  // the same search without simulating its winner
    no_peak.simulate_winner = false;
    const auto c = search_order_with(sc, factory, no_peak);
    CHECK(c.order == a.order);
    CHECK(c.makespan_ms == a.makespan_ms);
    CHECK(std::isnan(c.peak_memory_mb));
    // Not worse than the given order.
    CHECK(a.makespan_ms <= simulate(sc, factory(0)).makespan_ms + 1e-9);
    // Better than the best of as many random permutations (same evaluation budget).
    splitmix64 rng(99);
    double best_random = std::numeric_limits<double>::infinity();
    std::vector<std::uint32_t> perm(25);
    for (std::uint32_t i = 0; i < 25; ++i) perm[i] = i;
    for (std::size_t k = 0; k < a.evaluations; ++k) {
        for (std::size_t i = 24; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        best_random = std::min(best_random, evaluate_order(sc, factory(0), perm, limit).first);
    }
    CHECK(a.makespan_ms <= best_random);
    // Fixed generators: 1F1B under the same limit.
    const auto f = search_order(sc, one_f_one_b{}, opt);
    CHECK(f.makespan_ms <= simulate(sc, one_f_one_b{}).makespan_ms + 1e-9);
}

TEST_CASE("order search: the light-ends starts (lightest first and last) are among its starts") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const scenario sc = random_scenario(4, 9, seed);
        const std::size_t M = sc.microbatches;
        std::vector<std::uint32_t> desc(M);
        for (std::uint32_t j = 0; j < M; ++j) desc[j] = j;
        std::stable_sort(desc.begin(), desc.end(), [&](auto a, auto b) { return sc.work_ms(a) > sc.work_ms(b); });
        const std::uint32_t light = desc[M - 1], second = desc[M - 2];
        std::vector<std::uint32_t> ends{light};
        ends.insert(ends.end(), desc.begin(), desc.end() - 2);
        ends.push_back(second);
        std::vector<std::uint32_t> mirrored(ends.rbegin(), ends.rend());  // second first, light last, ascending
        order_search_options opt;
        opt.max_evaluations = order_search_starts;  // the starts alone
        const auto r = search_order(sc, one_f_one_b{}, opt);
        CHECK(r.evaluations == order_search_starts);
        for (const auto& o : {ends, mirrored})
            CHECK(r.makespan_ms <= evaluate_order(sc, one_f_one_b{}, o, std::numeric_limits<double>::infinity()).first);
        // Fewer than 4 micro-batches: no light-ends starts; the budget goes to the local search.
        const scenario small = random_scenario(3, 3, seed);
        CHECK(search_order(small, one_f_one_b{}, opt).evaluations == order_search_starts);
    }
}

TEST_CASE("order search: a given start continues an earlier search; never worse than the start") {
    const scenario sc = random_scenario(4, 12, 31);
    order_search_options opt;
    opt.max_evaluations = 16;
    opt.seed = 3;
    const auto first = search_order(sc, one_f_one_b{}, opt);
    REQUIRE(first.feasible);
    order_search_options more = opt;
    more.start = first.order;
    more.max_evaluations = 40;
    const auto next = search_order(sc, one_f_one_b{}, more);
    REQUIRE(next.feasible);
    CHECK(next.evaluations == 40);  // the start once, then local moves (no structured starts)
    CHECK(next.makespan_ms <= first.makespan_ms);
    CHECK(simulate(reorder(sc, next.order), one_f_one_b{}).makespan_ms == doctest::Approx(next.makespan_ms));
    // A start of one evaluation is the start itself.
    more.max_evaluations = 1;
    const auto same = search_order(sc, one_f_one_b{}, more);
    CHECK(same.order == first.order);
    CHECK(same.makespan_ms == first.makespan_ms);
    // The start must be a permutation of the micro-batches.
    for (auto bad : {std::vector<std::uint32_t>{0, 1, 2}, std::vector<std::uint32_t>(12, 0u)}) {
        more.start = bad;
        CHECK_THROWS_WITH_AS((void)search_order(sc, one_f_one_b{}, more), doctest::Contains("not a permutation"),
                             pipeplan::invalid_argument);
    }
    more.start = first.order;
    more.start[0] = 12;
    CHECK_THROWS_AS((void)search_order(sc, one_f_one_b{}, more), pipeplan::invalid_argument);
}

TEST_CASE("scenario JSON: round trip, ADL, errors with file, line and field path") {
    const scenario sc = parse_scenario_json(good_json, "s.json");
    CHECK(sc.stages == 2);
    CHECK(sc.microbatches == 2);
    CHECK(sc.peak(1, 1) == 25);
    CHECK(sc.network.latency_ms == 0.5);
    CHECK(sc.activation(1) == 5);
    nlohmann::json j = sc;
    const scenario back = j.get<scenario>();
    CHECK(back.forward_ms == sc.forward_ms);
    CHECK(back.peak_mb == sc.peak_mb);
    CHECK(back.activation_mb == sc.activation_mb);
    CHECK(back.network.bandwidth_gbps == sc.network.bandwidth_gbps);

    std::string t = good_json;
    CHECK(error_of(R"({"stages": 2)").rfind("s.json:1:", 0) == 0);
    CHECK(error_of(R"({"stages": 2)").find("invalid JSON") != std::string::npos);
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string s = t;
        s.replace(s.find(from), from.size(), to);
        return error_of(s);
    };
    CHECK(replaced("\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
                   "\"forward_ms\": [1, -2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]") ==
          "s.json:5:24: column 'microbatches[1].forward_ms[1]': expected a number in [0, 1e+09] ms, found -2");
    CHECK(replaced("\"model_state_mb\": [100, 100]", "\"model_state_mb\": [100]") ==
          "s.json:7:21: column 'model_state_mb': expected 2 values (one per stage), found 1");
    CHECK(replaced("\"stages\": 2,", "") .find("column 'stages': missing required field") != std::string::npos);
    CHECK(replaced("\"peak_mb\": [20, 25]", "\"peak_mb\": [20, 5]").find("microbatches[1].peak_mb[1]") != std::string::npos);
    CHECK(replaced("\"activation_mb\": [5, 5]", "\"activation_mb\": [5]").find("network.activation_mb") != std::string::npos);
    CHECK(replaced("\"latency_ms\": 0.5", "\"latency_ms\": \"x\"").find("s.json:8:29: column 'network.latency_ms'") != std::string::npos);
    CHECK(replaced("\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 20]",
                   "\"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 20]")
              .find("s.json:4:5: column 'microbatches[0].forward_ms': missing required field") != std::string::npos);
    CHECK_THROWS_AS((void)read_scenario_json("/nonexistent/x.json"), pipeplan::input_error);
}

TEST_CASE("make_scenario validates its vectors") {
    CHECK_THROWS_AS((void)make_scenario({{1, 2}}, {{1}}, {{1, 1}}, {{1, 1}}, {1, 1}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_scenario({{1, -2}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1, 1}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_scenario({{1, 2}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_scenario({{1, 2}}, {{1, 1}}, {{2, 1}}, {{1, 1}}, {1, 1}), pipeplan::invalid_argument);
    const scenario ok = make_scenario({{1, 2}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1, 1});
    CHECK(ok.stages == 2);
}

TEST_CASE("op strings parse back") {
    for (const char* s : {"F3", "B12", "W0", "f7", "R5", "F3.1", "B0.2"}) {
        const auto p = parse_op(s);
        REQUIRE(p);
        const bool chunked = std::string(s).find('.') != std::string::npos;
        CHECK(to_string(op{p->kind, p->mb, 0}, chunked ? static_cast<int>(p->chunk) : -1) == s);
    }
    for (const char* s : {"", "X1", "F", "F-1", "F1.", "F1x"}) CHECK_FALSE(parse_op(s));
}

TEST_CASE("trace and SVG output") {
    const scenario sc = split_into_chunks(random_scenario(3, 5, 11), 2);
    const auto s = interleaved_1f1b{2}(sc);
    const auto r = simulate(sc, s);
    std::ostringstream t;
    write_chrome_trace(t, r, s);
    const auto j = nlohmann::json::parse(t.str());
    std::size_t x = 0, c = 0;
    for (const auto& e : j["traceEvents"]) {
        x += e["ph"] == "X";
        c += e["ph"] == "C";
    }
    CHECK(x == 3 * 5 * 2 * 2);
    CHECK(c > 0);
    CHECK(t.str().find("\"F0.1\"") != std::string::npos);
    std::ostringstream v;
    svg_options o;
    o.memory_limit_mb = 5000;
    write_svg(v, r, s, o);
    const std::string svg = v.str();
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
    CHECK(svg.find("device 2") != std::string::npos);
    CHECK(svg.find("time (ms)") != std::string::npos);
    CHECK(svg.find("memory per device (MB)") != std::string::npos);
    CHECK(svg.find("limit 5000 MB") != std::string::npos);
    std::size_t rects = 0;
    for (std::size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) ++rects;
    CHECK(rects == 3 * 5 * 2 * 2);
}

namespace {
/// The SVG's width attribute.
double svg_width(const std::string& svg) {
    const auto p = svg.find("width=\"");
    return std::stod(svg.substr(p + 7));
}
std::size_t count_of(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (std::size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
    return n;
}
}  // namespace

TEST_CASE("SVG: the width grows with the ops, op kinds are marked without colour, several pipelines are grouped") {
    auto chart = [](std::size_t mbs, const svg_options& o = {}) {
        const scenario sc = scaled_scenario({1.0, 1.0, 1.0, 1.0}, std::vector<double>(mbs, 1.0), 2.0, 100.0, 10.0, 20.0);
        const auto r = simulate(sc, zb_h1{});
        std::ostringstream v;
        write_svg(v, r, pipeline_schedule(zb_h1{}(sc)), o);
        return v.str();
    };
    const std::string small = chart(4), large = chart(48);
    CHECK(svg_width(small) == doctest::Approx(1200.0));  // the minimum width
    CHECK(svg_width(large) > 3.0 * svg_width(small));    // 12x the ops: wider, labels stay readable
    // Every op of the large chart is labelled (at least its kind letter), and B and W carry
    // their patterns, so kinds are told apart without colour.
    CHECK(count_of(large, "<text x=") >= 4 * 48 * 3);
    CHECK(count_of(large, "fill=\"url(#pp-hlines)\"") == 4 * 48 + 1);  // every B, and its legend swatch
    CHECK(count_of(large, "fill=\"url(#pp-cross)\"") == 4 * 48 + 1);   // every W, and its legend swatch
    svg_options fixed;
    fixed.width_px = 900;
    CHECK(svg_width(chart(48, fixed)) == doctest::Approx(900.0));  // an explicit width is kept

    const scenario sc = scaled_scenario({1.0, 1.0}, std::vector<double>(6, 1.0), 2.0, 100.0, 10.0, 20.0);
    const pipeline_schedule sched(one_f_one_b{}(sc));
    const auto a = simulate(sc, sched);
    simulation_options no_curve;
    no_curve.record_memory_curve = false;
    const auto b = simulate(sc, sched, no_curve);
    const std::vector<svg_pipeline> both{{&a, &sched, "replica 0"}, {&b, &sched, "replica 1"}};
    svg_options o;
    o.makespan_ms = 150.0;
    o.lower_bound_ms = 120.0;
    o.memory_limit_mb = 400;
    std::ostringstream v;
    write_svg(v, both, o);
    const std::string svg = v.str();
    CHECK(svg.find("makespan 150.00 ms, lower bound 120.00 ms (×1.250); 2 pipelines") != std::string::npos);
    CHECK(svg.find("replica 0 — makespan") != std::string::npos);
    CHECK(svg.find("replica 1 — makespan") != std::string::npos);
    CHECK(count_of(svg, "<title>") == 2 * 2 * 2 * 6);
    CHECK(svg.find("memory per device (MB) of replica 0") != std::string::npos);  // replica 1 has no curve
    CHECK(svg.find("device memory limit 400 MB") != std::string::npos);
    CHECK_THROWS_AS(write_svg(v, std::vector<svg_pipeline>{}), pipeplan::invalid_argument);
}

TEST_CASE("scenario JSON: every number has a range; errors give file, line, column, field and range") {
    // (from, to, field path, range text): one value of good_json replaced by an out-of-range one.
    struct bad_value {
        const char* from;
        const char* to;
        const char* field;
        const char* range;
        const char* token;  ///< the bad value, where the error points
    };
    const bad_value cases[] = {
        {"\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
         "\"forward_ms\": [1, 2e9], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
         "microbatches[1].forward_ms[1]", "[0, 1e+09] ms", "2e9"},
        {"\"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
         "\"backward_ms\": [1e308, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]", "microbatches[1].backward_ms[0]",
         "[0, 1e+09] ms", "1e308"},
        {"\"stored_mb\": [10, 10], \"peak_mb\": [20, 25]", "\"stored_mb\": [10, -0.5], \"peak_mb\": [20, 25]",
         "microbatches[1].stored_mb[1]", "[0, 1e+09] MB", "-0.5"},
        {"\"peak_mb\": [20, 25]", "\"peak_mb\": [20, 1e10]", "microbatches[1].peak_mb[1]", "[0, 1e+09] MB", "1e10"},
        {"\"model_state_mb\": [100, 100]", "\"model_state_mb\": [100, 1.5e9]", "model_state_mb[1]", "[0, 1e+09] MB", "1.5e9"},
        {"\"latency_ms\": 0.5", "\"latency_ms\": 1e300", "network.latency_ms", "[0, 1e+09] ms", "1e300"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": -8", "network.bandwidth_gbps", "[0, 1e+06] Gbit/s", "-8"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": 8, \"intra_node_bandwidth_gbps\": 2e6",
         "network.intra_node_bandwidth_gbps", "[0, 1e+06] Gbit/s", "2e6"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": 8, \"intra_node_latency_ms\": -1", "network.intra_node_latency_ms",
         "[0, 1e+09] ms", "-1"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": 8, \"devices_per_node\": 0", "network.devices_per_node",
         "[1, 1048576]", "0"},
        {"\"activation_mb\": [5, 5]", "\"activation_mb\": [5, 1e12]", "network.activation_mb[1]", "[0, 1e+09] MB", "1e12"},
        {"\"stages\": 2,", "\"stages\": 2000000,", "stages", "[1, 1000000]", "2000000"},
        {"\"model_state_mb\": [100, 100]", "\"checkpoint_ratio\": [0.5, 1.5], \"model_state_mb\": [100, 100]",
         "checkpoint_ratio[1]", "[0, 1] (a ratio)", "1.5"},
    };
    for (const auto& c : cases) {
        std::string text = good_json;
        const std::size_t at = text.find(c.from);
        REQUIRE(at != std::string::npos);
        text.replace(at, std::strlen(c.from), c.to);
        const std::string e = error_of(text);
        CAPTURE(e);
        CHECK(e.rfind("s.json:", 0) == 0);
        CHECK(e.find(std::string("column '") + c.field + "': expected ") != std::string::npos);
        CHECK(e.find(c.range) != std::string::npos);
        // The line and column are those of the bad value.
        const auto where = pipeplan::position_at(text, text.find(c.token, at));
        CHECK(e.rfind("s.json:" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": ", 0) == 0);
    }
    // The largest values in range are accepted.
    std::string edge = good_json;
    edge.replace(edge.find("\"latency_ms\": 0.5"), 17, "\"latency_ms\": 1e9");
    CHECK(parse_scenario_json(edge, "s.json").network.latency_ms == 1e9);
}

TEST_CASE("scenario JSON: devices, placement and checkpoint_ratio") {
    std::string t = good_json;
    auto with = [&](const std::string& extra) {
        std::string s = t;
        s.replace(s.find("\"model_state_mb\""), 0, extra + ",\n  ");
        return s;
    };
    // Two stages as two chunks on one device (interleaved with D = 1), ratios per stage.
    const scenario sc = parse_scenario_json(with(R"("devices": 1, "placement": [0, 0], "checkpoint_ratio": [0.5, 1])"),
                                            "s.json");
    CHECK(sc.devices == 1);
    CHECK(sc.placement == std::vector<std::uint32_t>{0, 0});
    CHECK(sc.ratio(0) == 0.5);
    CHECK(placement_of(sc).chunks() == 2);
    nlohmann::json j = sc;
    const scenario back = j.get<scenario>();
    CHECK(back.devices == 1);
    CHECK(back.placement == sc.placement);
    CHECK(back.checkpoint_ratio == sc.checkpoint_ratio);
    CHECK(error_of(with(R"("devices": 3)")).find("column 'devices': expected an integer in [1, 2]") != std::string::npos);
    CHECK(error_of(with(R"("devices": 1)")).find("need a 'placement'") != std::string::npos);
    CHECK(error_of(with(R"("devices": 2, "placement": [0, 2])")).find("'placement[1]': expected a device index in [0, 1]") !=
          std::string::npos);
    CHECK(error_of(with(R"("devices": 2, "placement": [0])")).find("column 'placement'") != std::string::npos);
    CHECK(error_of(with(R"("devices": 2, "placement": [1, 1])")).find("no stage runs on device 0") != std::string::npos);
    CHECK(error_of(with(R"("checkpoint_ratio": [0.5, 1.5])")).find("'checkpoint_ratio[1]'") != std::string::npos);
}

TEST_CASE("placement_of and prepare_scenario: a scenario carries its placement") {
    scenario sc = split_into_chunks(random_scenario(2, 4, 5), 2);  // 4 chunks on 2 devices
    CHECK(sc.device_count() == 2);
    CHECK(sc.placement == std::vector<std::uint32_t>{0, 1, 0, 1});
    CHECK(placement_of(sc).kind() == placement_kind::interleaved);
    named_schedule_options o;
    const scenario p = prepare_scenario(schedule_name::interleaved, sc, o);
    CHECK(p.stages == 4);  // as placed: not split again
    CHECK(o.chunks == 2);
    check_schedule(p, make_generator(schedule_name::interleaved, o)(p));
    named_schedule_options ad;
    const scenario pa = prepare_scenario(schedule_name::adaptive, sc, ad);
    CHECK(make_generator(schedule_name::adaptive, ad)(pa).placement.devices() == 2);
    named_schedule_options three;
    three.chunks = 3;
    CHECK_THROWS_WITH_AS((void)prepare_scenario(schedule_name::interleaved, sc, three),
                         doctest::Contains("--chunks 3 contradicts the scenario"), pipeplan::invalid_argument);
    named_schedule_options plain;
    CHECK_THROWS_WITH_AS((void)prepare_scenario(schedule_name::one_f_one_b, sc, plain),
                         doctest::Contains("runs one stage per device"), pipeplan::invalid_argument);
    // A V-shaped map is recognized; any other map is an error.
    sc.placement = {0, 1, 1, 0};
    CHECK(placement_of(sc).kind() == placement_kind::v_shape);
    sc.placement = {0, 0, 1, 1};
    CHECK_THROWS_AS((void)placement_of(sc), pipeplan::invalid_argument);
    // --checkpoint-ratio: merak-* only.
    named_schedule_options r;
    r.checkpoint_ratio = 0.5;
    const scenario lin = random_scenario(4, 6, 7);
    CHECK(prepare_scenario(schedule_name::merak_early, lin, r).checkpoint_ratio ==
          merak_checkpoint_ratios(4, 0.5, merak_variant::early_recompute));
    CHECK_THROWS_WITH_AS((void)prepare_scenario(schedule_name::one_f_one_b, lin, r),
                         doctest::Contains("merak-* schedules only"), pipeplan::invalid_argument);
}

TEST_CASE("memory limits: fixed orders fail naming device, op, peak and limit") {
    const scenario sc = uniform_scenario_for_limits();
    const pipeline_schedule s = one_f_one_b{}(sc);
    const simulation_result r = simulate(sc, s);
    // Stage 0 of 1F1B, S = 3, M = 4: F0 F1 F2 B0 F3 B1 B2 B3; peak while F2 runs with F0, F1
    // stored: 100 + 2·10 + 20 = 140 MB.
    CHECK(r.peak_memory_mb[0] == 140.0);
    CHECK(r.peak_memory_op[0] == op{op_kind::F, 2, 0});
    CHECK_NOTHROW(check_memory_limit(r, s, 140.0));
    CHECK_THROWS_WITH_AS(check_memory_limit(r, s, 130.0),
                         doctest::Contains("exceeds the memory limit on device 0: peak 140.000000 MB during op F2 "
                                           "(stage 0), limit 130.000000 MB"),
                         pipeplan::limit_exceeded);
}

TEST_CASE("order search: invalid or deadlocking schedules are errors; one workspace") {
    const scenario sc = random_scenario(3, 6, 11);
    // A generator whose device 0 runs its ops backwards (B before F): a deadlock.
    auto broken = [](const scenario& s) {
        pipeline_schedule p = one_f_one_b{}(s);
        std::reverse(p.orders[0].begin(), p.orders[0].end());
        return p;
    };
    CHECK_THROWS_AS((void)search_order(sc, broken), schedule_deadlock);
    auto missing = [](const scenario& s) {
        pipeline_schedule p = one_f_one_b{}(s);
        p.orders[1].pop_back();
        return p;
    };
    CHECK_THROWS_WITH_AS((void)search_order(sc, missing), doctest::Contains("has no B op"), pipeplan::invalid_argument);
    // A generator that cannot meet the limit makes the order infeasible, not an error.
    adaptive tight;
    tight.memory_limit_mb = 1.0;
    order_search_options so;
    so.memory_limit_mb = 1.0;
    so.max_evaluations = 8;
    const auto none = search_order(sc, tight, so);
    CHECK_FALSE(none.feasible);
    // One evaluator, many orders: the same figures as fresh simulations. makespan() takes the
    // discovery-based generators' replay_facts (no simulation, NaN peak) and simulates the others.
    order_evaluator ev(sc);
    adaptive held;
    held.memory_limit_mb = 1e9;
    zb_h1 zb;
    zb.memory_limit_mb = 1e9;
    constexpr double no_limit = std::numeric_limits<double>::infinity();
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        std::vector<std::uint32_t> order{0, 1, 2, 3, 4, 5};
        pipeplan::splitmix64 rng(seed);
        for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
        const auto [ms, peak] = ev(one_f_one_b{}, order, no_limit);
        const simulation_result fresh = simulate(reorder(sc, order), one_f_one_b{});
        CHECK(ms == fresh.makespan_ms);
        CHECK(peak == *std::max_element(fresh.peak_memory_mb.begin(), fresh.peak_memory_mb.end()));
        CHECK(ev.makespan(one_f_one_b{}, order, no_limit) == std::pair{ms, peak});
        for (const auto& gen : {any_generator(held), any_generator(zb)}) {
            const pipeline_schedule s = gen(reorder(sc, order));
            REQUIRE(s.replay.has_value());
            const simulation_result replay = simulate(reorder(sc, order), s);
            CHECK(s.replay->makespan_ms == replay.makespan_ms);
            const auto [quick_ms, quick_peak] = ev.makespan(gen, order, 1e9);
            CHECK(quick_ms == replay.makespan_ms);
            CHECK(std::isnan(quick_peak));
            CHECK(ev(gen, order, 1e9).first == replay.makespan_ms);
            // A search limit below the generator's: the replay_facts do not settle it; simulated.
            CHECK(ev.makespan(gen, order, 1e8) == ev(gen, order, 1e8));
        }
    }
}

TEST_CASE("order search: the evaluation memo finds exactly the (order, limit) pairs added") {
    pipeplan::schedule::detail::evaluation_memo memo;
    const std::vector<std::uint32_t> a{0, 1, 2, 3}, b{1, 0, 2, 3}, c{0, 1, 3, 2};
    CHECK(memo.find(a, 0) == nullptr);
    memo.add(a, 0, {10.0, 5.0});
    memo.add(a, 2, {9.0, 6.0});
    memo.add(b, 0, {std::numeric_limits<double>::infinity(), 7.0});
    REQUIRE(memo.find(a, 0) != nullptr);
    CHECK(*memo.find(a, 0) == std::pair{10.0, 5.0});
    CHECK(*memo.find(a, 2) == std::pair{9.0, 6.0});
    CHECK(memo.find(b, 0)->first == std::numeric_limits<double>::infinity());
    CHECK(memo.find(a, 1) == nullptr);
    CHECK(memo.find(b, 2) == nullptr);
    CHECK(memo.find(c, 0) == nullptr);
    // Many orders: every one found with its own value.
    std::vector<std::vector<std::uint32_t>> orders;
    std::vector<std::uint32_t> o{0, 1, 2, 3, 4, 5};
    do orders.push_back(o);
    while (std::next_permutation(o.begin(), o.end()));
    for (std::size_t k = 0; k < orders.size(); ++k) memo.add(orders[k], k % 3, {static_cast<double>(k), 0.0});
    for (std::size_t k = 0; k < orders.size(); ++k) {
        const auto* v = memo.find(orders[k], k % 3);
        REQUIRE(v != nullptr);
        CHECK(v->first == static_cast<double>(k));
        CHECK(memo.find(orders[k], k % 3 + 1) == nullptr);
    }
}

TEST_CASE("orders text: chunks, comments, errors name line, device, position and op") {
    scenario sc = split_into_chunks(random_scenario(2, 2, 3), 2);
    const stage_placement pl = placement_of(sc);
    const pipeline_schedule ref = interleaved_1f1b{2}(sc);
    std::string text = "# interleaved, 2 devices x 2 chunks\n\n";
    for (const auto& dev : ref.orders) {
        for (const op& o : dev) text += op_label(ref, o) + " ";
        text += "\n";
    }
    const orders_text t = parse_orders_text(text, "o.txt", sc, pl);
    CHECK(t.schedule.orders == ref.orders);
    CHECK(t.line_of_device == std::vector<std::size_t>{3, 4});
    CHECK(simulate(sc, t.schedule).makespan_ms == simulate(sc, ref).makespan_ms);
    auto err = [&](const std::string& s) {
        try {
            (void)parse_orders_text(s, "o.txt", sc, pl);
        } catch (const pipeplan::input_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(err("F0.0 F0.2\n").find("o.txt:1: column 'device 0, position 1, op F0.2': chunk out of range") !=
          std::string::npos);
    CHECK(err("F0 W0 B0\nF0\n").find("W before its B") != std::string::npos);
    CHECK(err("F0\nF0\nF0\n").find("more device lines than the 2 devices") != std::string::npos);
}

TEST_CASE("scenario JSON: a 2 MB file with an error at its end is located exactly (issue 13, finding 3)") {
    const std::string mb = "{\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [1, 1], \"peak_mb\": [2, 2]}";
    std::string text = "{\"stages\": 2, \"microbatches\": [\n";
    std::size_t lines = 1, count = 0;
    while (text.size() < (2u << 20)) {
        text += mb + ",\n";
        ++lines;
        ++count;
    }
    text += mb + "],\n\"model_state_mb\": [100,   \"x\"]}\n";
    lines += 2;
    const std::string e = error_of(text);
    CHECK(e == "s.json:" + std::to_string(lines) + ":27: column 'model_state_mb[1]': expected a number in [0, 1e+09] MB, "
               "found \"x\"");
    // The same file without the error reads, with every micro-batch.
    text.replace(text.find("\"x\""), 3, "100");
    CHECK(parse_scenario_json(text, "s.json").microbatches == count + 1);
}

TEST_CASE("scenario::validate: a scenario built in code is held to the JSON reader's ranges (one set of limits)") {
    // Each case sets one value of a valid scenario; `hi` is its upper limit (scenario_limits).
    // At the limit every entry point accepts it; just above (and at -1, NaN, inf), validate(),
    // simulate(), simulator::run() refuse it naming the field and the range, and so does the
    // JSON reader on the same scenario written as a file: the two paths cannot drift apart.
    using L = scenario_limits;
    struct field_case {
        const char* field;
        double hi;
        const char* range;
        void (*set)(scenario&, double);
    };
    const field_case cases[] = {
        {"microbatches[1].forward_ms[0]", L::max_time_ms, "[0, 1e+09] ms", [](scenario& s, double x) { s.forward_ms[s.at(1, 0)] = x; }},
        {"microbatches[0].backward_ms[1]", L::max_time_ms, "[0, 1e+09] ms", [](scenario& s, double x) { s.backward_ms[s.at(0, 1)] = x; }},
        {"microbatches[1].stored_mb[1]", L::max_memory_mb, "[0, 1e+09] MB",
         [](scenario& s, double x) { s.stored_mb[s.at(1, 1)] = x, s.peak_mb[s.at(1, 1)] = L::max_memory_mb; }},
        {"microbatches[0].peak_mb[0]", L::max_memory_mb, "[0, 1e+09] MB", [](scenario& s, double x) { s.peak_mb[s.at(0, 0)] = x; }},
        {"model_state_mb[1]", L::max_memory_mb, "[0, 1e+09] MB", [](scenario& s, double x) { s.model_state_mb[1] = x; }},
        {"network.activation_mb[1]", L::max_memory_mb, "[0, 1e+09] MB", [](scenario& s, double x) { s.activation_mb[1] = x; }},
        {"network.latency_ms", L::max_time_ms, "[0, 1e+09] ms", [](scenario& s, double x) { s.network.latency_ms = x; }},
        {"network.intra_node_latency_ms", L::max_time_ms, "[0, 1e+09] ms",
         [](scenario& s, double x) { s.network.intra_node_latency_ms = x; }},
        {"network.bandwidth_gbps", L::max_bandwidth_gbps, "[0, 1e+06] Gbit/s", [](scenario& s, double x) { s.network.bandwidth_gbps = x; }},
        {"network.intra_node_bandwidth_gbps", L::max_bandwidth_gbps, "[0, 1e+06] Gbit/s",
         [](scenario& s, double x) { s.network.intra_node_bandwidth_gbps = x; }},
    };
    const scenario base = two_stage(5.0, network_model{0.5, 8.0, 0.0, 0.0, 1});
    const auto schedule = pipeline_schedule(one_f_one_b{}(base));
    const auto message = [](auto&& f) -> std::string {
        try {
            f();
        } catch (const pipeplan::error& e) {
            return e.what();
        }
        return "no error";
    };
    for (const auto& c : cases) {
        CAPTURE(c.field);
        scenario ok = base;
        c.set(ok, c.hi);
        CHECK_NOTHROW(ok.validate());
        CHECK_NOTHROW((void)simulate(ok, schedule));
        CHECK_NOTHROW((void)parse_scenario_json(nlohmann::json(ok).dump(), "s.json"));
        for (const double bad : {std::nextafter(c.hi, 2 * c.hi), 1e308, -1.0, std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::quiet_NaN()}) {
            CAPTURE(bad);
            scenario sc = base;
            c.set(sc, bad);
            const std::string e = message([&] { sc.validate(); });
            CHECK(e.rfind(std::string("scenario: ") + c.field + " must be a number in " + c.range + ", is ", 0) == 0);
            CHECK(message([&] { (void)simulate(sc, schedule); }) == e);
            simulator sim;
            CHECK(message([&] { (void)sim.run(sc, schedule); }) == e);
            if (!std::isfinite(bad)) continue;  // JSON cannot carry inf or NaN
            const std::string r = message([&] { (void)parse_scenario_json(nlohmann::json(sc).dump(), "s.json"); });
            CHECK(r.find(std::string("column '") + c.field + "': expected a number in " + c.range) != std::string::npos);
        }
    }
    // Counts: stages and devices_per_node (the reader's integer ranges).
    scenario sc = base;
    sc.network.devices_per_node = 0;
    CHECK(message([&] { sc.validate(); }) == "scenario: network.devices_per_node must lie in [1, 1048576], is 0");
    sc.network.devices_per_node = static_cast<std::uint32_t>(L::max_devices_per_node) + 1;
    CHECK(message([&] { (void)simulate(sc, schedule); }) == "scenario: network.devices_per_node must lie in [1, 1048576], is 1048577");
    sc = base;
    sc.stages = static_cast<std::size_t>(L::max_stages) + 1;
    CHECK(message([&] { sc.validate(); }) == "scenario: stages must lie in [1, 1000000], is 1000001");
    // make_scenario (the batching tier's way in) refuses the same values.
    CHECK(message([] { (void)make_scenario({{1, 2e9}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1, 1}); }) ==
          "scenario: microbatches[0].forward_ms[1] must be a number in [0, 1e+09] ms, is 2e+09");
}
