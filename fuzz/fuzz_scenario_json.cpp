// libFuzzer target: the scenario JSON reader (schedule/scenario_json.hpp), then — for small
// valid scenarios — GPipe, 1F1B and the adaptive schedule, the simulator, the trace and the SVG
// writers. Malformed or extreme input must throw pipeplan::error (never crash, hang, leak or
// trip a sanitizer); no non-finite figure may reach the writers.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

namespace ps = pipeplan::schedule;

namespace {
void run(const ps::scenario& sc, const ps::pipeline_schedule& sched) {
    const ps::simulation_result r = ps::simulate(sc, sched);
    std::ostringstream out;
    ps::write_chrome_trace(out, r, sched);
    ps::write_svg(out, r, sched);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    try {
        const ps::scenario sc = ps::parse_scenario_json(in, "fuzz.json");
        sc.validate();
        if (sc.stages > 16 || sc.microbatches > 64) return 0;  // keep each input fast
        for (const auto& make : {+[](const ps::scenario& s) { return ps::gpipe{}(s); },
                                 +[](const ps::scenario& s) { return ps::one_f_one_b{}(s); },
                                 +[](const ps::scenario& s) { return ps::adaptive{}(s); }}) {
            try {
                run(sc, make(sc));
            } catch (const pipeplan::error&) {
            }
        }
    } catch (const pipeplan::error&) {
        // A clear error is the expected answer to malformed input.
    }
    return 0;
}
