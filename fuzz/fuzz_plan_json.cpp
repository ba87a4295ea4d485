// libFuzzer target: the JSON plan reader (plan/json.hpp). A plan that reads must validate
// without crashing (plan/validate.hpp) and survive a round trip through both formats byte for
// byte. Malformed input must throw pipeplan::error (never crash, hang, leak or trip a sanitizer).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "memory_rule.hpp"

namespace pl = pipeplan::plan;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    try {
        const pl::execution_plan p = pl::execution_plan_from_json(in, "fuzz.json");
        (void)pl::validate(p);
        for (const auto& prog : p.programs) (void)pl::validate_rank(pl::rank_plan{p.header, prog});
        pipeplan::fuzz::check_memory_rule(p);  // the memory rule agrees with the header figures
        const std::string bin = pl::to_binary(p);
        if (pl::to_binary(pl::execution_plan_from_binary(bin, "again.plan")) != bin) __builtin_trap();
        const std::string text = pl::to_json_text(p);
        if (pl::to_json_text(pl::execution_plan_from_json(text, "again.json")) != text) __builtin_trap();
    } catch (const pipeplan::error&) {
        // A clear error is the expected answer to malformed input.
    }
    return 0;
}
