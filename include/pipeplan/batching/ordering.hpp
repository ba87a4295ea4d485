// pipeplan/batching/ordering.hpp — the order in which the exact split sees the samples.
//
// The exact split optimises over contiguous ranges of one order, so the order decides which samples can
// share a micro-batch. Decoder-only: sort by length, descending (every range is then padded to
// its first sample's length). Encoder-decoder: a 2-D order of (encoder, decoder) lengths in which
// neighbours have similar shapes — lexicographic (encoder, then decoder, descending), or a tour:
// a nearest-neighbour path over the distinct shapes from the largest one, improved by 2-opt,
// with distance |Δ encoder| + w · |Δ decoder| tokens, or decoder bands: samples grouped by
// decoder length in bands of fixed width, encoder length descending and ascending in alternate
// bands (a boustrophedon path over the 2-D shapes). automatic_candidate_orders lists the orders
// the default (DP-guided) search solves (docs/batching.md compares them).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan::batching {

/// How samples are ordered before splitting.
enum class ordering_method : std::uint8_t {
    automatic = 0,      ///< sorted (decoder-only) / tour (encoder-decoder)
    sorted = 1,         ///< by length descending (encoder-decoder: same as lexicographic)
    lexicographic = 2,  ///< by (encoder length, decoder length) descending
    tour = 3,           ///< nearest-neighbour tour + 2-opt over (encoder, decoder) shapes
    dataset = 4,        ///< as given (for comparisons)
};

[[nodiscard]] constexpr auto enum_names(ordering_method) noexcept {
    return name_table<ordering_method, 5>{"ordering",
                                          {{{ordering_method::automatic, "auto"},
                                            {ordering_method::sorted, "sorted"},
                                            {ordering_method::lexicographic, "lexicographic"},
                                            {ordering_method::tour, "tour"},
                                            {ordering_method::dataset, "dataset"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(ordering_method m) noexcept { return name_of(m); }
/// Parses an ordering name; throws invalid_argument listing the valid ones.
[[nodiscard]] inline ordering_method parse_ordering_method(std::string_view s) { return parse_name<ordering_method>(s); }

namespace detail {

/// Open-path 2-opt over points; `window` bounds how far apart the two cut edges may be
/// (0 = unbounded). Deterministic: first-improvement in index order, at most `max_passes`.
inline void two_opt_path(std::vector<std::pair<int, int>>& pts, std::size_t window, int max_passes,
                         long long dec_weight) {
    const std::size_t n = pts.size();
    if (n < 4) return;
    const auto d = [&](std::size_t a, std::size_t b) -> long long {
        return 4 * std::llabs(static_cast<long long>(pts[a].first) - pts[b].first) +
               dec_weight * std::llabs(static_cast<long long>(pts[a].second) - pts[b].second);
    };
    // edge[k] = d(k, k + 1) of the current path, kept up to date across reversals.
    std::vector<long long> edge(n - 1);
    for (std::size_t k = 0; k + 1 < n; ++k) edge[k] = d(k, k + 1);
    for (int pass = 0; pass < max_passes; ++pass) {
        bool improved = false;
        // Reverse pts[i+1..j]; edges (i, i+1) and (j, j+1) are replaced by (i, j) and (i+1, j+1).
        // The path's first point is fixed (the largest shape); j + 1 == n reverses a suffix.
        for (std::size_t i = 0; i + 2 < n; ++i) {
            const std::size_t jmax = window ? std::min(n - 1, i + 1 + window) : n - 1;
            for (std::size_t j = i + 2; j <= jmax; ++j) {
                long long delta = d(i, j) - edge[i];
                if (j + 1 < n) delta += d(i + 1, j + 1) - edge[j];
                if (delta < 0) {
                    std::reverse(pts.begin() + static_cast<std::ptrdiff_t>(i + 1),
                                 pts.begin() + static_cast<std::ptrdiff_t>(j + 1));
                    for (std::size_t k = i; k <= j && k + 1 < n; ++k) edge[k] = d(k, k + 1);
                    improved = true;
                }
            }
        }
        if (!improved) break;
    }
}

}  // namespace detail

/// The order (a permutation of sample ids) used by the exact split. Ties are broken by sample id, so the
/// result is deterministic. `tour_decoder_weight` (in quarters: 4 = decoder tokens count as much
/// as encoder tokens, 1 = a quarter) weighs decoder-length differences in the tour's distance.
[[nodiscard]] inline std::vector<int> order_samples(std::span<const sample_shape> shapes, bool encoder_decoder,
                                                    ordering_method method, int tour_decoder_weight = 4) {
    if (tour_decoder_weight < 0) throw invalid_argument("tour decoder weight must be >= 0");
    std::vector<int> ids(shapes.size());
    std::iota(ids.begin(), ids.end(), 0);
    if (method == ordering_method::dataset) return ids;
    if (method == ordering_method::automatic)
        method = encoder_decoder ? ordering_method::tour : ordering_method::sorted;
    if (!encoder_decoder || method != ordering_method::tour) {
        std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
            const auto& x = shapes[static_cast<std::size_t>(a)];
            const auto& y = shapes[static_cast<std::size_t>(b)];
            if (x.seqlen_tokens != y.seqlen_tokens) return x.seqlen_tokens > y.seqlen_tokens;
            if (x.dec_seqlen_tokens != y.dec_seqlen_tokens) return x.dec_seqlen_tokens > y.dec_seqlen_tokens;
            return x.raw_tokens > y.raw_tokens;
        });
        return ids;
    }
    // Tour over the distinct (encoder, decoder) shapes; samples of one shape stay together.
    std::vector<std::pair<int, int>> pts;
    pts.reserve(shapes.size());
    for (const auto& s : shapes) pts.emplace_back(s.seqlen_tokens, s.dec_seqlen_tokens);
    std::sort(pts.begin(), pts.end(), std::greater<>());
    pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
    const std::size_t n = pts.size();
    // Nearest neighbour from the largest shape (ties: the lexicographically larger point).
    std::vector<std::pair<int, int>> path;
    path.reserve(n);
    std::vector<char> used(n, 0);
    std::size_t cur = 0;
    used[0] = 1;
    path.push_back(pts[0]);
    for (std::size_t step = 1; step < n; ++step) {
        long long best = -1;
        std::size_t arg = 0;
        for (std::size_t k = 0; k < n; ++k) {
            if (used[k]) continue;
            const long long dist = 4 * std::llabs(static_cast<long long>(pts[k].first) - pts[cur].first) +
                                   tour_decoder_weight *
                                       std::llabs(static_cast<long long>(pts[k].second) - pts[cur].second);
            if (best < 0 || dist < best) {
                best = dist;
                arg = k;
            }
        }
        used[arg] = 1;
        cur = arg;
        path.push_back(pts[arg]);
    }
    detail::two_opt_path(path, n > 2000 ? 200 : 0, 50, tour_decoder_weight);
    // Rank of each shape on the path, then samples by (rank, id).
    std::vector<std::pair<std::pair<int, int>, int>> rank(n);
    for (std::size_t k = 0; k < n; ++k) rank[k] = {path[k], static_cast<int>(k)};
    std::sort(rank.begin(), rank.end());
    const auto rank_of = [&](const sample_shape& s) {
        const auto it = std::lower_bound(rank.begin(), rank.end(),
                                         std::make_pair(std::make_pair(s.seqlen_tokens, s.dec_seqlen_tokens), -1));
        return it->second;
    };
    std::vector<int> key(shapes.size());
    for (std::size_t i = 0; i < shapes.size(); ++i) key[i] = rank_of(shapes[i]);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
        return key[static_cast<std::size_t>(a)] < key[static_cast<std::size_t>(b)];
    });
    return ids;
}

/// Samples in bands of `band_tokens` decoder tokens (longest decoders first); inside a band by
/// encoder length, descending in the first band and alternating (descending, ascending, ...) so
/// that consecutive bands meet at similar encoder lengths; ties by decoder length descending,
/// then id. Deterministic; band_tokens must be >= 1.
[[nodiscard]] inline std::vector<int> decoder_band_order(std::span<const sample_shape> shapes, int band_tokens) {
    if (band_tokens < 1) throw invalid_argument("decoder band width must be >= 1 token");
    std::vector<int> ids(shapes.size());
    std::iota(ids.begin(), ids.end(), 0);
    int top = 0;
    for (const auto& s : shapes) top = std::max(top, s.dec_seqlen_tokens / band_tokens);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
        const auto& x = shapes[static_cast<std::size_t>(a)];
        const auto& y = shapes[static_cast<std::size_t>(b)];
        const int bx = x.dec_seqlen_tokens / band_tokens, by = y.dec_seqlen_tokens / band_tokens;
        if (bx != by) return bx > by;
        if (x.seqlen_tokens != y.seqlen_tokens)
            return (top - bx) % 2 == 0 ? x.seqlen_tokens > y.seqlen_tokens : x.seqlen_tokens < y.seqlen_tokens;
        return x.dec_seqlen_tokens > y.dec_seqlen_tokens;
    });
    return ids;
}

/// One candidate order of the default encoder-decoder search, with the name docs and benchmarks use.
struct candidate_order {
    std::string name;
    std::vector<int> ids;
};

/// The orders the default (`automatic`) encoder-decoder search solves, in this order:
/// lexicographic, tour w = 1/4, tour w = 1, decoder bands of 48 and 64 tokens. No single one is
/// best across batches (docs/batching.md): lexicographic wins on short targets, a tour or the
/// bands where long-target samples are mixed in.
[[nodiscard]] inline std::vector<candidate_order> automatic_candidate_orders(std::span<const sample_shape> shapes) {
    std::vector<candidate_order> out;
    out.push_back({"lexicographic", order_samples(shapes, true, ordering_method::lexicographic)});
    out.push_back({"tour w=1/4", order_samples(shapes, true, ordering_method::tour, 1)});
    out.push_back({"tour w=1", order_samples(shapes, true, ordering_method::tour, 4)});
    out.push_back({"decoder bands 48", decoder_band_order(shapes, 48)});
    out.push_back({"decoder bands 64", decoder_band_order(shapes, 64)});
    return out;
}

}  // namespace pipeplan::batching
