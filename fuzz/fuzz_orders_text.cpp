// libFuzzer target: the device orders reader (schedule/orders_text.hpp, `simulate --orders`),
// then the simulator, the trace and the SVG on what it reads. The first line of an input is
// "DEVICES CHUNKS MICROBATCHES" (1-8, 1-3, 1-16): the scenario the orders run on (generated
// here, chunks placed interleaved); the rest is the orders text. Malformed orders must throw
// pipeplan::error (never crash, hang, leak or trip a sanitizer).
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/orders_text.hpp"

namespace ps = pipeplan::schedule;

namespace {

/// Reads the next decimal number of `s` (after spaces); false when there is none.
bool next_number(std::string_view& s, std::size_t& x) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec != std::errc{}) return false;
    s.remove_prefix(static_cast<std::size_t>(p - s.data()));
    return true;
}

/// D stages with M micro-batches of varied times and memory, split into C chunks per device.
ps::scenario make_scenario(std::size_t D, std::size_t C, std::size_t M) {
    ps::scenario sc;
    sc.stages = D;
    sc.microbatches = M;
    for (std::size_t s = 0; s < D; ++s)
        for (std::size_t j = 0; j < M; ++j) {
            const double t = 1.0 + static_cast<double>((3 * j + 5 * s) % 7);
            sc.forward_ms.push_back(t);
            sc.backward_ms.push_back(2 * t);
            sc.stored_mb.push_back(10 * t);
            sc.peak_mb.push_back(20 * t);
        }
    sc.model_state_mb.assign(D, 100.0);
    sc.activation_mb.assign(M, 8.0);
    return ps::split_into_chunks(sc, C);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::size_t eol = in.find('\n');
    if (eol == std::string_view::npos) return 0;
    std::string_view head = in.substr(0, eol);
    std::size_t D = 0, C = 0, M = 0;
    if (!next_number(head, D) || !next_number(head, C) || !next_number(head, M)) return 0;
    if (D < 1 || D > 8 || C < 1 || C > 3 || M < 1 || M > 16) return 0;
    const ps::scenario sc = make_scenario(D, C, M);
    try {
        const ps::orders_text t = ps::parse_orders_text(in.substr(eol + 1), "fuzz.orders", sc, ps::placement_of(sc));
        const ps::simulation_result r = ps::simulate(sc, t.schedule);
        std::ostringstream out;
        ps::write_chrome_trace(out, r, t.schedule);
        ps::write_svg(out, r, t.schedule);
    } catch (const pipeplan::error&) {
        // A clear error (or a deadlock across devices) is the expected answer to malformed orders.
    }
    return 0;
}
