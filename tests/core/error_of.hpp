// The message of the error a callable throws: the tests of every tier check messages with it.
#pragma once

#include <string>

#include "pipeplan/core/error.hpp"

namespace pipeplan::test {

/// what() of the E that `f` throws; "" when it throws none (any other exception propagates).
template <class E = pipeplan::error, class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "";
}

}  // namespace pipeplan::test
