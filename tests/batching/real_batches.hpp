// Global batches drawn from ../shared/data/lengths as real trainers do: shuffle the samples with
// a seed, then take samples until a token budget (input + target tokens) is reached. Used by the
// real-data tests and the benchmarks; callers check pipeplan::test::shared_data_dir() first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/core/random.hpp"
#include "support.hpp"

namespace pipeplan::test {

/// All samples of lengths/<file> (e.g. "superni_gpt.csv"), read once per process.
inline const std::vector<batching::sample>& length_samples(const std::string& file) {
    static std::map<std::string, std::vector<batching::sample>> cache;
    auto it = cache.find(file);
    if (it == cache.end()) {
        const auto dir = shared_data_dir();
        std::vector<batching::sample> v;
        if (dir) v = batching::read_batch_csv(*dir / "lengths" / file);
        it = cache.emplace(file, std::move(v)).first;
    }
    return it->second;
}

/// Samples in a seeded Fisher–Yates order (splitmix64), taken while the running total of
/// input + target tokens stays within `token_budget`.
inline std::vector<batching::sample> draw_batch(const std::string& file, long long token_budget, std::uint64_t seed) {
    const auto& all = length_samples(file);
    std::vector<std::size_t> idx(all.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    splitmix64 rng(seed);
    for (std::size_t i = idx.size(); i > 1; --i) std::swap(idx[i - 1], idx[rng() % i]);
    std::vector<batching::sample> out;
    long long total = 0;
    for (std::size_t i : idx) {
        const auto& s = all[i];
        total += static_cast<long long>(s.input_tokens) + s.target_tokens;
        if (total > token_budget) break;
        out.push_back(s);
    }
    return out;
}

/// draw_batch with a share of synthetic long-target samples (chain-of-thought math: input tokens
/// uniform in [40, 150], target tokens uniform in [80, 300]): each slot is, with probability
/// `long_share`, such a sample (drawn from a second splitmix64 stream, seed ^ 0x5851F42D4C957F2D)
/// instead of the next real one. long_share 0 gives draw_batch's batch. The same generator as
/// benchmarks/batching/mixed_batches.py (the DynaPipe side by side), sample for sample.
inline std::vector<batching::sample> draw_mixed_batch(const std::string& file, long long token_budget,
                                                      std::uint64_t seed, double long_share) {
    const auto& all = length_samples(file);
    std::vector<std::size_t> idx(all.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    splitmix64 rng(seed);
    for (std::size_t i = idx.size(); i > 1; --i) std::swap(idx[i - 1], idx[rng() % i]);
    splitmix64 mix(seed ^ 0x5851F42D4C957F2DULL);
    const auto threshold = static_cast<std::uint64_t>(long_share * static_cast<double>(1ULL << 53));
    std::vector<batching::sample> out;
    long long total = 0;
    for (std::size_t k = 0;;) {
        batching::sample s;
        if (long_share > 0 && (mix() >> 11) < threshold) {
            s.input_tokens = 40 + static_cast<int>(mix() % 111);
            s.target_tokens = 80 + static_cast<int>(mix() % 221);
        } else {
            if (k == idx.size()) break;
            s = all[idx[k++]];
        }
        total += static_cast<long long>(s.input_tokens) + s.target_tokens;
        if (total > token_budget) break;
        out.push_back(s);
    }
    return out;
}

}  // namespace pipeplan::test
