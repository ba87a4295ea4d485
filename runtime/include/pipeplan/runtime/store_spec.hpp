// pipeplan/runtime/store_spec.hpp — naming a plan store on a command line:
//   dir:PATH             a directory_store rooted at PATH
//   redis://HOST:PORT    a redis_store (needs hiredis at build time)
// open_store() returns an any_store, which models plan_store by forwarding to the backend.
#pragma once

#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "pipeplan/runtime/directory_store.hpp"
#include "pipeplan/runtime/redis_store.hpp"

namespace pipeplan::runtime {

struct redis_address {
    std::string host;
    std::uint16_t port = 6379;
};

/// Parses "dir:PATH" or "redis://HOST:PORT"; throws pipeplan::invalid_argument naming the
/// accepted forms.
[[nodiscard]] inline std::variant<std::string, redis_address> parse_store_spec(std::string_view spec) {
    const auto bad = [&](const std::string& why) {
        return option_error("store", "{} '" + std::string(spec) + "': " + why + " (use dir:PATH or redis://HOST:PORT)");
    };
    if (spec.substr(0, 4) == "dir:") {
        if (spec.size() == 4) throw bad("empty path");
        return std::string(spec.substr(4));
    }
    if (spec.substr(0, 8) == "redis://") {
        const std::string_view rest = spec.substr(8);
        const auto colon = rest.rfind(':');
        if (colon == std::string_view::npos || colon == 0) throw bad("needs a host and a port");
        unsigned port = 0;
        const std::string_view p = rest.substr(colon + 1);
        const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
        if (ec != std::errc{} || end != p.data() + p.size() || port == 0 || port > 65535) throw bad("bad port");
        return redis_address{std::string(rest.substr(0, colon)), static_cast<std::uint16_t>(port)};
    }
    throw bad("unknown store");
}

/// A plan store chosen at run time (models plan_store).
class any_store {
public:
    explicit any_store(directory_store s) : s_(std::move(s)) {}
    explicit any_store(redis_store s) : s_(std::move(s)) {}

    void put(const plan_key& key, std::string_view bytes) {
        std::visit([&](auto& s) { s.put(key, bytes); }, s_);
    }
    [[nodiscard]] std::string get(const plan_key& key, timeout_ms timeout) {
        return std::visit([&](auto& s) { return s.get(key, timeout); }, s_);
    }
    [[nodiscard]] std::string describe() const {
        return std::visit([](const auto& s) { return s.describe(); }, s_);
    }

private:
    std::variant<directory_store, redis_store> s_;
};
static_assert(plan_store<any_store>);

/// Opens the store named by `spec` (parse_store_spec). A Redis store connects lazily.
[[nodiscard]] inline any_store open_store(std::string_view spec) {
    auto parsed = parse_store_spec(spec);
    if (auto* dir = std::get_if<std::string>(&parsed)) return any_store(directory_store(*dir));
    const auto& r = std::get<redis_address>(parsed);
    return any_store(redis_store(r.host, r.port));
}

}  // namespace pipeplan::runtime
