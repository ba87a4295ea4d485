// runtime/bootstrap.hpp: the communicator id exchanged through a plan store.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "pipeplan/runtime/bootstrap.hpp"
#include "pipeplan/runtime/directory_store.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace std::chrono_literals;

TEST_CASE("bootstrap: the communicator id goes through a plan store under <job>.bootstrap/epoch, with a timeout") {
    CHECK(bootstrap_key("job-1", 3).str() == "job-1.bootstrap/3/0");
    CHECK_THROWS_AS((void)bootstrap_key("bad/name", 0), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)bootstrap_key(std::string(120, 'j'), 0), doctest::Contains("too long"),
                         pipeplan::invalid_argument);
    const auto dir = std::filesystem::temp_directory_path() / ("pipeplan_bootstrap_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    directory_store store(dir);
    std::vector<std::byte> id(128), got(128), small(64);
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = std::byte(i * 7 + 1);
    std::thread rank0([&] {
        std::this_thread::sleep_for(30ms);  // the fetcher is already waiting
        publish_bootstrap_id(store, "job", 1, id);
    });
    fetch_bootstrap_id(store, "job", 1, got, 10s);
    rank0.join();
    CHECK(got == id);
    CHECK_THROWS_WITH_AS(fetch_bootstrap_id(store, "job", 1, small, 1s), doctest::Contains("expected 64"),
                         pipeplan::input_error);
    CHECK_THROWS_WITH_AS(fetch_bootstrap_id(store, "job", 2, got, 20ms), doctest::Contains("job.bootstrap/2/0"),
                         timeout_error);
    CHECK_THROWS_AS(publish_bootstrap_id(store, "job", 1, std::span<const std::byte>{}), pipeplan::invalid_argument);
    std::filesystem::remove_all(dir);
}

