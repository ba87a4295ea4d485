#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support.hpp"

namespace {

/// Prints the closing line every test suite prints and .ci/setup sums, "N passed, N failed,
/// N skipped", counting test cases as doctest's own "[doctest] test cases:" line does.
struct closing_line : doctest::IReporter {
    explicit closing_line(const doctest::ContextOptions&) {}
    void test_run_end(const doctest::TestRunStats& s) override {
        std::printf("%u passed, %u failed, %u skipped\n", s.numTestCasesPassingFilters - s.numTestCasesFailed,
                    s.numTestCasesFailed, s.numTestCases - s.numTestCasesPassingFilters);
        std::fflush(stdout);
    }
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("closing_line", 1, closing_line);

}  // namespace

int main(int argc, char** argv) {
    if (const auto dir = pipeplan::test::shared_data_dir())
        std::printf("note: reference data in %s\n", dir->string().c_str());
    else
        std::printf("note: reference data not found (looked in %s); the test cases that need it are SKIPPED\n",
                    pipeplan::test::data_dir_search_text().c_str());
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
