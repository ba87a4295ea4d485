// Naming a batch file's line in errors about one sample (`split`, `plan`).
#pragma once

#include <cstddef>
#include <utility>

#include "pipeplan/batching/errors.hpp"
#include "pipeplan/core/csv.hpp"
#include "pipeplan/core/error.hpp"

namespace pipeplan::cli {

/// Runs `f`; an error about one sample (its 0-based id) is re-thrown naming the batch file and the
/// sample's line there.
template <class F>
void naming_sample_lines(const csv_table& batch, F&& f) {
    const auto rethrow = [&](long long id, const error& e) {
        if (id >= 0 && static_cast<std::size_t>(id) < batch.rows())
            throw input_error(batch.source(), batch.line_of(static_cast<std::size_t>(id)), "", e.what());
    };
    try {
        std::forward<F>(f)();
    } catch (const batching::split_error& e) {
        rethrow(e.sample(), e);
        throw;
    } catch (const batching::sample_error& e) {
        rethrow(e.sample(), e);
        throw;
    }
}

}  // namespace pipeplan::cli
