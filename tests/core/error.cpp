// core/error.hpp: messages stay printable (control bytes escaped) and bounded in size.
#include <doctest/doctest.h>

#include <string>

#include "pipeplan/core/error.hpp"

TEST_CASE("error: messages stay printable and bounded") {
    CHECK(pipeplan::printable(std::string("a\0b\x1f", 4)) == "a\\x00b\\x1f");
    CHECK(pipeplan::printable(std::string(100, 'x'), 10) == std::string(10, 'x') + "... (100 bytes)");
    const pipeplan::error e(std::string("line one\nhas \0 NUL", 18));
    CHECK(std::string(e.what()) == "line one\nhas \\x00 NUL");
    const pipeplan::error big(std::string(10000, 'y'));
    CHECK(std::string(big.what()).size() < 4200);
}
