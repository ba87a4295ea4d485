#include <doctest/doctest.h>

#include <set>
#include <string>
#include <type_traits>

#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/plan.hpp"

using namespace pipeplan::plan;

TEST_CASE("instruction: the kind table is complete, ordered by code and round-trips names") {
    std::set<std::string> names;
    for (std::size_t i = 0; i < builtin_kinds.size(); ++i) {
        const auto& k = builtin_kinds[i];
        CHECK(static_cast<std::size_t>(k.kind) == i);
        CHECK(names.insert(std::string(k.name)).second);
        CHECK(kind_name(k.kind) == k.name);
        REQUIRE(parse_kind(k.name).has_value());
        CHECK(*parse_kind(k.name) == k.kind);
        CHECK(is_builtin(k.kind));
    }
    CHECK(kind_name(static_cast<instr_kind>(200)) == "user<200>");
    CHECK(parse_kind("user<200>") == static_cast<instr_kind>(200));
    CHECK_FALSE(parse_kind("user<20>").has_value());  // below the user range
    CHECK_FALSE(parse_kind("user<256>").has_value());
    CHECK_FALSE(parse_kind("forwards").has_value());
    CHECK(is_unknown(static_cast<instr_kind>(100)));
    CHECK(category(static_cast<instr_kind>(130)) == kind_category::user);
}

TEST_CASE("instruction: starts pair with their waits and their matching starts") {
    for (const auto& k : builtin_kinds) {
        if (!is_message_start(k.kind)) continue;
        const instr_kind w = wait_of(k.kind);
        CHECK(is_message_wait(w));
        CHECK(is_activation_message(w) == is_activation_message(k.kind));
        const instr_kind m = matching_start(k.kind);
        CHECK(m != k.kind);
        CHECK(matching_start(m) == k.kind);
        CHECK(is_activation_message(m) == is_activation_message(k.kind));
        CHECK((category(k.kind) == kind_category::send_start) != (category(m) == kind_category::send_start));
    }
    CHECK(wait_of(instr_kind::forward) == instr_kind::forward);
}

TEST_CASE("instruction: trivially copyable, fixed layout, dtypes") {
    static_assert(std::is_trivially_copyable_v<instruction>);
    CHECK(sizeof(instruction) == 64);  // files hold 56 bytes: clock_mhz shares the bytes field (fields.hpp)
    CHECK(dtype_bytes(dtype::fp32) == 4);
    CHECK(dtype_bytes(dtype::bf16) == 2);
    CHECK(dtype_bytes(dtype::fp64) == 8);
    for (auto t : {dtype::fp32, dtype::fp16, dtype::bf16, dtype::fp8, dtype::fp64}) CHECK(parse_dtype(to_string(t)) == t);
    CHECK(dtype_choices() == "fp32|fp16|bf16|fp8|fp64");
    CHECK_FALSE(parse_dtype("fp128"));
    CHECK_FALSE(parse_dtype("int8").has_value());
    instruction a, b;
    b.peer = 3;
    CHECK(a != b);
    CHECK(a.in == no_slot);
}

TEST_CASE("plan: ranks, devices and replicas") {
    plan_header h;
    h.devices = 4;
    h.dp = 2;
    h.chunks = 2;
    CHECK(placement_problem(h) == "no stage_devices map for 2 chunks per device");
    set_placement(h, pipeplan::schedule::stage_placement::v_shape(4, 2));
    CHECK(h.placement == "v-shape");
    CHECK(h.stage_devices == std::vector<std::uint32_t>{0, 1, 2, 3, 3, 2, 1, 0});
    CHECK(placement_problem(h).empty());
    CHECK(h.ranks() == 8);
    CHECK(h.virtual_stages() == 8);
    CHECK(h.device_of_rank(5) == 1);
    CHECK(h.replica_of_rank(5) == 1);
    CHECK(h.device_of_stage(5) == 2);
    h.stage_devices[0] = 1;  // device 1 runs three stages, device 0 one
    CHECK(placement_problem(h) == "device 1 runs more than 2 stages");
    h.stage_devices[0] = 4;
    CHECK(placement_problem(h) == "stage_devices[0] = 4 is not a device (devices = 4)");
    h.stage_devices.pop_back();
    CHECK(placement_problem(h) == "stage_devices has 7 entries, devices x chunks is 8");
    set_placement(h, pipeplan::schedule::stage_placement::interleaved(4, 2));
    CHECK(h.device_of_stage(5) == 1);
    execution_plan p;
    p.header = h;
    p.programs.resize(8);
    p.programs[3].rank = 3;
    CHECK(share_of(p, 3).program.rank == 3);
    CHECK(share_of(p, 3).header == h);
}
