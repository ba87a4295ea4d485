#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support.hpp"

int main(int argc, char** argv) {
    if (!pipeplan::test::shared_data_dir())
        std::printf("note: reference data not found (looked in $PIPEPLAN_DATA_DIR and %s); "
                    "test cases that need it are skipped\n",
                    PIPEPLAN_SHARED_DATA_DIR);
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
