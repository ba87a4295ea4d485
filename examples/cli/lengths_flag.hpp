// `--lengths FILE --tokens N --seed S [--mix NAME=W,...]`: a global batch drawn from length
// files (batching/draw.hpp) in place of `--batch FILE`, for `compare`, `plan` and `split`.
// Flag parsing and the mapping only: the drawing is the library's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "flags.hpp"
#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/draw.hpp"
#include "pipeplan/core/error.hpp"

namespace pipeplan::cli {

struct lengths_flags {
    std::vector<std::string> files;   ///< --lengths (repeatable)
    long long tokens = 65536;         ///< --tokens
    std::uint64_t seed = 1;           ///< --seed
    std::vector<std::string> mix;     ///< --mix NAME=W,... (tasks or files)
};

/// Registers --lengths, --tokens, --seed and --mix on `sub`. With `batch_flag`, --lengths
/// replaces that flag (give one of them; checked by batch_from_flags).
inline void add_lengths_options(CLI::App* sub, lengths_flags& f, bool batch_flag) {
    sub->add_option("--lengths", f.files,
                    std::string("Length file(s) (input_tokens,target_tokens[,task,...]; e.g. ../shared/data/lengths/superni_gpt.csv)") +
                        (batch_flag ? ": draw the global batch from them instead of --batch" : ""))
        ->delimiter(',');
    sub->add_option("--tokens", f.tokens, "Token budget of a global batch drawn from --lengths (input + target tokens)")
        ->capture_default_str()
        ->check(integer_in(1LL, 1LL << 40));
    sub->add_option("--seed", f.seed, "Seed of the shuffle of --lengths")->capture_default_str();
    sub->add_option("--mix", f.mix,
                    "Mixture weights of --lengths by task or file, e.g. --mix task_a=2,task_b=1 (groups not named are left out)")
        ->delimiter(',');
}

/// The mixture weights of --mix ("NAME=W"); throws invalid_argument naming a bad entry.
[[nodiscard]] inline std::vector<std::pair<std::string, double>> mixture_weights(const std::vector<std::string>& mix) {
    std::vector<std::pair<std::string, double>> out;
    for (const auto& m : mix) {
        const auto eq = m.rfind('=');
        double w = 0;
        std::size_t used = 0;
        try {
            if (eq != std::string::npos) w = std::stod(m.substr(eq + 1), &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (eq == std::string::npos || eq == 0 || used == 0 || used != m.size() - eq - 1)
            throw invalid_argument("--mix '" + m + "': expected NAME=WEIGHT (a task or length file and a number >= 0)");
        out.emplace_back(m.substr(0, eq), w);
    }
    return out;
}

/// The draw options of the flags.
[[nodiscard]] inline batching::draw_options draw_options_of(const lengths_flags& f) {
    batching::draw_options d;
    d.tokens = f.tokens;
    d.seed = f.seed;
    d.weights = mixture_weights(f.mix);
    return d;
}

/// The length pool of --lengths.
[[nodiscard]] inline batching::length_pool pool_of(const lengths_flags& f) {
    std::vector<std::filesystem::path> files(f.files.begin(), f.files.end());
    return batching::read_length_pool(files);
}

/// The `index`-th global batch (0-based) drawn from --lengths with the flags' seed and budget.
[[nodiscard]] inline std::vector<batching::sample> drawn_batch(const lengths_flags& f, std::uint64_t index) {
    const batching::length_pool pool = pool_of(f);
    batching::batch_drawer d(pool, draw_options_of(f));
    std::vector<batching::sample> b = d.next();
    for (std::uint64_t i = 0; i < index; ++i) b = d.next();
    return b;
}

/// Flags of the block that need --lengths are errors without it (`given`: flags on the line).
inline void reject_lengths_flags_without_lengths(const lengths_flags& f, const std::set<std::string>& given) {
    for (const char* flag : {"--tokens", "--seed", "--mix"})
        reject_unless(given, flag, !f.files.empty(), "without --lengths (they say how a batch is drawn from length files)");
}

/// A command's batch: --batch FILE, or the `index`-th batch drawn from --lengths (exactly one
/// of them must be given).
[[nodiscard]] inline std::vector<batching::sample> batch_from_flags(const std::string& batch_file, const lengths_flags& f,
                                                                    std::uint64_t index) {
    if (batch_file.empty() == f.files.empty())
        throw invalid_argument("give the batch as --batch FILE or --lengths FILE [--tokens N --seed S] (one of them)");
    if (!batch_file.empty()) return batching::read_batch_csv(batch_file);
    return drawn_batch(f, index);
}

}  // namespace pipeplan::cli
