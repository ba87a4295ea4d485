// A small table-driven cost model for the batching tests: deterministic pseudo-random times per
// (component, mbs, seqlen, dec_seqlen, recompute) — deliberately not monotone, so the exact split may not
// rely on it — and memory that grows monotonically with the shape (as real activations do).
#pragma once

#include <cstdint>

#include "pipeplan/core/estimate.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::test {

struct table_cost_model {
    std::uint64_t seed = 1;
    bool encoder_decoder = false;
    int max_seqlen_tokens = 4096;      ///< longer queries: out_of_profiled_range
    int max_dec_seqlen_tokens = 1024;
    double time_noise = 0.5;           ///< relative random part of the times (0 = smooth)
    double stored_mb_per_token = 0.01;
    bool head_memory = false;          ///< does the LM head report memory (else unsupported)?

    [[nodiscard]] static double unit(std::uint64_t x) noexcept {  // splitmix64 → [0, 1)
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        return static_cast<double>(x >> 11) * 0x1.0p-53;
    }
    [[nodiscard]] double noise(const layer_query& q, int salt) const noexcept {
        std::uint64_t k = seed * 0x100000001b3ull;
        for (std::uint64_t v : {static_cast<std::uint64_t>(q.comp), static_cast<std::uint64_t>(q.mbs),
                                static_cast<std::uint64_t>(q.seqlen_tokens), static_cast<std::uint64_t>(q.dec_seqlen_tokens),
                                static_cast<std::uint64_t>(q.recompute), static_cast<std::uint64_t>(salt)})
            k = (k ^ v) * 0x100000001b3ull + 0x7f4a7c15ull;
        return unit(k);
    }

    [[nodiscard]] layer_cost evaluate(const layer_query& q) const {
        if (q.mbs < 1 || q.seqlen_tokens < 1) return {};
        if (q.seqlen_tokens > max_seqlen_tokens || q.dec_seqlen_tokens > max_dec_seqlen_tokens)
            return {estimate<double>::out_of_range(), estimate<double>::out_of_range(),
                    estimate<double>::out_of_range(), estimate<double>::out_of_range()};
        const double rc = static_cast<double>(q.recompute);
        double tokens = static_cast<double>(q.mbs) * q.seqlen_tokens;
        if (q.comp == component::decoder) tokens = static_cast<double>(q.mbs) * (q.seqlen_tokens + 2.0 * q.dec_seqlen_tokens);
        if (q.comp == component::postprocess && encoder_decoder) tokens = static_cast<double>(q.mbs) * q.dec_seqlen_tokens;
        const double base = 0.5 + tokens * 0.002 / q.tp;
        const double f = base * (1 + time_noise * (noise(q, 1) - 0.5));
        const double b = 2 * base * (1 + time_noise * (noise(q, 2) - 0.5)) * (1 + 0.2 * rc);
        const double stored = tokens * stored_mb_per_token / q.tp / (1 + rc);
        const double peak = stored * 1.5 + 1;
        switch (q.comp) {
            case component::encoder:
            case component::decoder: return {f, b, stored, peak};
            case component::embedding: return {0.1 * f, 0.1 * b, estimate<double>::unsupported(), estimate<double>::unsupported()};
            case component::postprocess:
                if (head_memory) return {0.5 * f, 0.5 * b, 0.5 * stored, 0.5 * peak};
                return {0.5 * f, 0.5 * b, estimate<double>::unsupported(), estimate<double>::unsupported()};
        }
        return {};
    }
    [[nodiscard]] estimate<double> parameter_mb(component c, int tp, recompute_mode) const {
        switch (c) {
            case component::encoder: return 10.0 / tp;
            case component::decoder: return encoder_decoder ? estimate<double>(13.0 / tp) : estimate<double>::unsupported();
            case component::embedding: return 5.0 / tp;
            case component::postprocess: return estimate<double>::unsupported();
        }
        return estimate<double>::unsupported();
    }
    [[nodiscard]] bool is_encoder_decoder() const { return encoder_decoder; }
};

}  // namespace pipeplan::test
