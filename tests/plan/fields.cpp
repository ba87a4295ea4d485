// The plan's field table (plan/fields.hpp): the names files and printers use, and a
// set_frequency's clock held in its own member but written in the files' `bytes` field.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "pipeplan/plan/fields.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/serialize.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

/// Rank 0's share of a small 1F1B plan with a set_frequency of `mhz` before its first forward.
rank_plan with_clock(std::uint32_t mhz) {
    const auto sc = test::random_scenario(2, 3, 5);
    const auto c = test::all_schedules(sc)[1];
    rank_plan rp = share_of(lower(c.sc, c.sched), 0);
    auto& prog = rp.program.instructions;
    std::size_t at = 0;
    while (prog[at].kind != instr_kind::forward) ++at;
    prog.insert(prog.begin() + static_cast<std::ptrdiff_t>(at), make_set_frequency(mhz, prog[at]));
    return rp;
}

const nlohmann::json& first_of_kind(const nlohmann::json& j, const std::string& kind) {
    for (const auto& x : j["programs"][0]["instructions"])
        if (x["kind"] == kind) return x;
    throw std::runtime_error("no " + kind);
}

}  // namespace

TEST_CASE("fields: a set_frequency's clock is its own member, written in the files' bytes field") {
    const rank_plan rp = with_clock(1410);
    const rank_plan none = with_clock(0);
    const instruction* clock = nullptr;
    for (const auto& x : rp.program.instructions)
        if (x.kind == instr_kind::set_frequency) clock = &x;
    REQUIRE(clock != nullptr);
    CHECK(clock->clock_mhz == 1410);
    CHECK(clock->bytes == 0);
    CHECK(frequency_mhz(*clock) == 1410);
    // the files: the clock under "bytes", no other field, 56 bytes per instruction as before
    const auto j = nlohmann::json::parse(to_json_text(rp));
    CHECK(first_of_kind(j, "set_frequency")["bytes"] == 1410);
    CHECK_FALSE(first_of_kind(j, "set_frequency").contains("clock_mhz"));
    CHECK(first_of_kind(j, "send_activation_start")["bytes"] != 0);  // a message's size stays bytes
    CHECK(to_binary(rp).size() == to_binary(none).size());
    const std::string bin = to_binary(rp);
    // both readers put it back in clock_mhz, and messages' sizes in bytes
    CHECK(rank_plan_from_binary(bin) == rp);
    CHECK(rank_plan_from_json(to_json_text(rp)) == rp);
    // printers: the clock as MHz, never as bytes
    const std::string shown = describe(*clock);
    CHECK(shown.find("1410 MHz") != std::string::npos);
    CHECK(shown.find("bytes") == std::string::npos);
}

TEST_CASE("fields: every instruction field the table names is the member it writes") {
    // A field written from one member and read into another would break the round trip of a
    // plan whose fields all differ from their defaults.
    instruction x;
    x.kind = instr_kind::send_grad_start;
    x.mode = 0;
    x.reserved = 3;
    x.microbatch = 7;
    x.stage = 2;
    x.peer = 1;
    x.in = 4;
    x.shape = {1, 2, 3, 4};
    x.bytes = 99;
    std::size_t n = 0;
    for_each_field<instruction>([&](const auto& f) {
        ++n;
        CHECK(f.member_of(x) == f.member);  // only a set_frequency's bytes field moves
    });
    CHECK(n == 13);
    instruction s = make_set_frequency(900, x);
    for_each_field<instruction>([&](const auto& f) {
        if constexpr (std::is_same_v<typename std::decay_t<decltype(f)>::value_type, std::uint64_t>)
            if (f.name == "bytes") CHECK(s.*f.member_of(s) == 900);
    });
}
