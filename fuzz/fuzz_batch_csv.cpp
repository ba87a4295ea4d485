// libFuzzer target: the batch CSV reader (core/csv.hpp + batching/batch_csv.hpp) and the padded
// shapes of what it reads. Malformed input must throw pipeplan::error (never crash, hang, leak
// or trip a sanitizer).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    try {
        const auto batch = pipeplan::batching::parse_batch_csv(in, "fuzz.csv");
        pipeplan::batching::length_rules rules;
        rules.round_to_tokens = size > 0 ? 1 + data[0] % 64 : 8;
        rules.max_seqlen_tokens = size > 1 ? data[1] * 16 : 0;
        for (const bool encoder_decoder : {false, true}) {
            try {
                (void)pipeplan::batching::padded_shapes(batch, rules, encoder_decoder);
            } catch (const pipeplan::error&) {
            }
        }
    } catch (const pipeplan::error&) {
        // A clear error is the expected answer to malformed input.
    }
    return 0;
}
