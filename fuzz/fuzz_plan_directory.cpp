// libFuzzer target: plan directories (plan/directory.hpp) — a manifest and several rank files
// read as one plan — and plan-store records read back through the directory store
// (runtime/directory_store.hpp: envelope, key check, signature). The input is cut at the bytes
// "\n--\n" into the manifest and rank_0.plan, rank_1.plan, ... (a chunk starting with '{' is
// written as rank_<r>.json); the last chunk is also planted as a store record. A directory
// that reads must validate without crashing; malformed input must throw pipeplan::error (never
// crash, hang, leak or trip a sanitizer).
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/directory.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/runtime/directory_store.hpp"

namespace fs = std::filesystem;

namespace {

/// A scratch folder of this process, removed when it exits.
struct scratch_dir {
    fs::path path = fs::temp_directory_path() / ("pipeplan-fuzz-dir-" + std::to_string(::getpid()));
    scratch_dir() { fs::create_directories(path); }
    ~scratch_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

const fs::path& scratch() {
    static const scratch_dir d;
    return d.path;
}

std::vector<std::string_view> chunks(std::string_view in) {
    std::vector<std::string_view> out;
    for (;;) {
        const auto cut = in.find("\n--\n");
        out.push_back(in.substr(0, cut));
        if (cut == std::string_view::npos || out.size() == 9) return out;
        in.remove_prefix(cut + 4);
    }
}

void write(const fs::path& p, std::string_view bytes) { std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size())); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::vector<std::string_view> parts = chunks(in);
    const fs::path dir = scratch() / "plan";
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir);
    write(dir / "plan.json", parts[0]);
    for (std::size_t r = 1; r < parts.size(); ++r)
        write(dir / pipeplan::plan::rank_file_name(r - 1, !parts[r].empty() && parts[r][0] == '{'), parts[r]);
    try {
        const pipeplan::plan::execution_plan p = pipeplan::plan::read_plan_directory(dir);
        (void)pipeplan::plan::validate(p);
    } catch (const pipeplan::error&) {
    }
    pipeplan::runtime::directory_store store(scratch() / "store", pipeplan::runtime::store_secret{"fuzzing-shared-secret"});
    const pipeplan::runtime::plan_key key{"fuzz", 1, 0};
    fs::create_directories(store.path_of(key).parent_path());
    write(store.path_of(key), parts.back());
    try {
        (void)pipeplan::runtime::fetch_rank_plan(store, key, pipeplan::runtime::timeout_ms(0));
    } catch (const pipeplan::error&) {
    }
    return 0;
}
