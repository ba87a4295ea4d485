// pipeplan/runtime/store_spec.hpp — naming a plan store on a command line:
//   dir:PATH                             a directory_store rooted at PATH
//   redis://[[USER]:PASSWORD@]HOST:PORT  a redis_store (needs hiredis at build time), sending
//                                        AUTH [USER] PASSWORD on every connection
// `rediss://` (Redis over TLS) is refused with a clear error: Debian 12's hiredis 0.14 has no
// TLS. Messages never repeat a password (redacted_spec). open_store() returns an any_store,
// which models plan_store by forwarding to the backend; with PIPEPLAN_STORE_KEY_FILE set, it
// signs and checks every record with that key (plan_store.hpp).
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
    std::string user, password;  ///< empty password: no AUTH
};

/// `spec` with a password in a redis:// URL replaced by "***" (for messages).
[[nodiscard]] inline std::string redacted_spec(std::string_view spec) {
    const auto scheme = spec.find("://");
    const auto at = spec.rfind('@');
    if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme) return std::string(spec);
    const auto colon = spec.find(':', scheme + 3);
    if (colon == std::string_view::npos || colon > at) return std::string(spec);
    return std::string(spec.substr(0, colon + 1)) + "***" + std::string(spec.substr(at));
}

/// Parses "dir:PATH" or "redis://[[USER]:PASSWORD@]HOST:PORT"; throws
/// pipeplan::invalid_argument naming the accepted forms (and the spec, password redacted).
[[nodiscard]] inline std::variant<std::string, redis_address> parse_store_spec(std::string_view spec) {
    const auto bad = [&](const std::string& why) {
        return option_error("store", "{} '" + redacted_spec(spec) + "': " + why +
                                         " (use dir:PATH or redis://[[USER]:PASSWORD@]HOST:PORT)");
    };
    if (spec.substr(0, 4) == "dir:") {
        if (spec.size() == 4) throw bad("empty path");
        return std::string(spec.substr(4));
    }
    if (spec.substr(0, 9) == "rediss://")
        throw bad("TLS is not built in (this build's hiredis has no TLS support); reach the server over a trusted "
                  "network or a TLS tunnel (stunnel, ssh -L) with redis://");
    if (spec.substr(0, 8) == "redis://") {
        std::string_view rest = spec.substr(8);
        redis_address out;
        if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
            const std::string_view userinfo = rest.substr(0, at);
            const auto colon = userinfo.find(':');
            if (colon == std::string_view::npos) throw bad("credentials must be USER:PASSWORD@ or :PASSWORD@");
            out.user = std::string(userinfo.substr(0, colon));
            out.password = std::string(userinfo.substr(colon + 1));
            if (out.password.empty()) throw bad("empty password");
            rest = rest.substr(at + 1);
        }
        const auto colon = rest.rfind(':');
        if (colon == std::string_view::npos || colon == 0) throw bad("needs a host and a port");
        unsigned port = 0;
        const std::string_view p = rest.substr(colon + 1);
        const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
        if (ec != std::errc{} || end != p.data() + p.size() || port == 0 || port > 65535) throw bad("bad port");
        out.host = std::string(rest.substr(0, colon));
        out.port = static_cast<std::uint16_t>(port);
        return out;
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
    /// The backend's writer lock of `job` (directory_store / redis_store::lock_writer).
    [[nodiscard]] writer_lock lock_writer(const std::string& job) {
        return std::visit([&](auto& s) { return s.lock_writer(job); }, s_);
    }

private:
    std::variant<directory_store, redis_store> s_;
};
static_assert(plan_store<any_store>);

/// Opens the store named by `spec` (parse_store_spec) with `secret` (default: the key of
/// PIPEPLAN_STORE_KEY_FILE, none when unset). A Redis store connects lazily.
[[nodiscard]] inline any_store open_store(std::string_view spec, store_secret secret) {
    auto parsed = parse_store_spec(spec);
    if (auto* dir = std::get_if<std::string>(&parsed)) return any_store(directory_store(*dir, std::move(secret)));
    const auto& r = std::get<redis_address>(parsed);
    redis_store s(r.host, r.port);
    s.set_auth(r.user, r.password).set_secret(std::move(secret));
    return any_store(std::move(s));
}
[[nodiscard]] inline any_store open_store(std::string_view spec) { return open_store(spec, store_secret_from_env()); }

}  // namespace pipeplan::runtime
