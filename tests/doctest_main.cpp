#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support.hpp"

int main(int argc, char** argv) {
    if (const auto dir = pipeplan::test::shared_data_dir())
        std::printf("note: reference data in %s\n", dir->string().c_str());
    else
        std::printf("note: reference data not found (looked in %s); the test cases that need it are SKIPPED\n",
                    pipeplan::test::data_dir_search_text().c_str());
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
