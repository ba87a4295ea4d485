// libFuzzer target: the profile CSV reader (core/csv.hpp + cost/profile.hpp), then queries.
//
// The input is up to three CSV texts separated by a line "%%" (timing, activation, model
// state); missing parts are header-only tables. A well-formed profile is then queried on a few
// shapes taken from the input, in every interpolation mode. Malformed input must throw
// pipeplan::error (never crash, hang, leak or trip a sanitizer).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    std::string_view parts[3] = {"tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms\n",
                                 "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n",
                                 "tp,recompute,component,memory_mb\n"};
    std::size_t begin = 0;
    for (int k = 0; k < 3 && begin <= in.size(); ++k) {
        const std::size_t sep = in.find("\n%%\n", begin);
        const std::size_t end = sep == std::string_view::npos ? in.size() : sep;
        parts[k] = in.substr(begin, end - begin);
        if (sep == std::string_view::npos) break;
        begin = sep + 4;
    }
    try {
        const auto model = pipeplan::profile_cost_model::parse(parts[0], parts[1], parts[2]);
        const int a = size > 0 ? data[0] : 1, b = size > 1 ? data[size - 1] : 16;
        for (const pipeplan::interpolation_mode mode :
             {pipeplan::interpolation_mode::linear, pipeplan::interpolation_mode::dynapipe,
              pipeplan::interpolation_mode::recommended}) {
            const auto m = model.with_mode(mode);
            for (const int tp : m.tp_degrees())
                for (const pipeplan::component c : pipeplan::all_components) {
                    pipeplan::layer_query q;
                    q.comp = c;
                    q.tp = tp;
                    q.mbs = 1 + a % 16;
                    q.seqlen_tokens = 1 + b * 37;
                    q.dec_seqlen_tokens = c == pipeplan::component::encoder ? 0 : 1 + a * 11;
                    (void)m.evaluate(q);
                    (void)m.parameter_mb(c, tp, q.recompute);
                }
        }
    } catch (const pipeplan::error&) {
        // A clear error is the expected answer to malformed input.
    }
    return 0;
}
