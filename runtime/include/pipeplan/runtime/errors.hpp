// pipeplan/runtime/errors.hpp — the exceptions of the runtime tier.
//
// Every runtime failure derives from pipeplan::error, so a trainer catches one type. A step
// never hangs: waits that exceed their timeout throw timeout_error; a rank that fails aborts
// the transport so the other ranks end with aborted_error instead of waiting for it.
#pragma once

#include <string>

#include "pipeplan/core/error.hpp"

namespace pipeplan::runtime {

/// A wait (message, collective, plan fetch) exceeded its timeout. The message names the rank,
/// the peer and, when thrown by the executor, the instruction and micro-batch.
class timeout_error : public error {
public:
    using error::error;
};

/// Another rank failed and aborted the step; the message names that rank and its error.
class aborted_error : public error {
public:
    using error::error;
};

/// Two ranks disagree about a message (tag or size): the plans do not match each other.
class protocol_error : public error {
public:
    using error::error;
};

}  // namespace pipeplan::runtime
