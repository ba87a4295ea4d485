// The scenario reader's error path: a scenario file of N bytes whose last
// value is bad must be read and the error located (file, line, column, field) in time
// proportional to N. Compare the 1 MB and 4 MB figures: the ratio should be about 4.
// Also a file nested a million deep (refused after 65 brackets).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

namespace {

/// A 4-stage scenario of about `bytes` bytes, one micro-batch per line, whose very last number
/// (model_state_mb[3]) is negative.
std::string scenario_with_error_at_end(std::size_t bytes) {
    const std::string mb = "{\"forward_ms\": [1.25, 2.5, 1.75, 3], \"backward_ms\": [2.5, 5, 3.5, 6], "
                           "\"stored_mb\": [10, 10, 10, 10], \"peak_mb\": [20, 20, 20, 20]}";
    std::string s = "{\"stages\": 4, \"microbatches\": [\n";
    while (s.size() + mb.size() + 64 < bytes) s += mb + ",\n";
    s += mb + "],\n\"model_state_mb\": [100, 100, 100, -1]}\n";
    return s;
}

/// Reads `text` in every iteration; the read must fail.
void refuse_each_iteration(benchmark::State& st, const std::string& text, const char* file) {
    for (auto _ : st) {
        try {
            (void)pipeplan::schedule::parse_scenario_json(text, file);
            st.SkipWithError("no error");
        } catch (const pipeplan::input_error& e) {
            benchmark::DoNotOptimize(e.line());
        }
    }
}

void BM_ScenarioJsonErrorAtEnd(benchmark::State& st) {
    const std::string text = scenario_with_error_at_end(static_cast<std::size_t>(st.range(0)) << 20);
    refuse_each_iteration(st, text, "big.json");
    st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ScenarioJsonErrorAtEnd)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond);

void BM_ScenarioJsonNestedMillionDeep(benchmark::State& st) {
    refuse_each_iteration(st, std::string(1000000, '['), "deep.json");
}
BENCHMARK(BM_ScenarioJsonNestedMillionDeep)->Unit(benchmark::kMicrosecond);

}  // namespace
