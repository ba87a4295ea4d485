// pipeplan/batching/batch_csv.hpp — reads a global batch from CSV.
//
// Format (docs/formats.md): a header with at least the columns `input_tokens` and
// `target_tokens` (other columns are ignored, in any order); every data row is one sample, in
// order; sample ids are the 0-based data-row numbers. Token counts are integers in [0, 2^30], and
// so is their sum, which must be >= 1 (an empty sample is an error).
// Errors name the file, line and column (pipeplan::input_error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/csv.hpp"

namespace pipeplan::batching {

/// The samples of an already parsed batch table.
[[nodiscard]] inline std::vector<sample> batch_from_table(const csv_table& t) {
    const std::size_t in_col = t.column("input_tokens");
    const std::size_t tgt_col = t.column("target_tokens");
    std::vector<sample> out;
    out.reserve(t.rows());
    for (std::size_t r = 0; r < t.rows(); ++r) {
        sample s;
        s.input_tokens = static_cast<int>(t.integer(r, in_col, 0, max_supported_tokens));
        s.target_tokens = static_cast<int>(t.integer(r, tgt_col, 0, max_supported_tokens));
        const std::int64_t length = std::int64_t{s.input_tokens} + s.target_tokens;
        if (length == 0) t.fail(r, in_col, "empty sample: input_tokens + target_tokens is 0");
        if (length > max_supported_tokens)
            t.fail(r, tgt_col, "input_tokens + target_tokens = " + std::to_string(length) + " exceeds 2^30 tokens");
        out.push_back(s);
    }
    return out;
}

/// Parses batch CSV text; `source` names it in error messages.
[[nodiscard]] inline std::vector<sample> parse_batch_csv(std::string_view text, std::string source) {
    return batch_from_table(csv_table::parse(text, std::move(source)));
}

/// Reads a batch CSV file. Throws input_error (file, line, column) when it is unreadable or malformed.
[[nodiscard]] inline std::vector<sample> read_batch_csv(const std::filesystem::path& path) {
    return batch_from_table(csv_table::read(path));
}

}  // namespace pipeplan::batching
