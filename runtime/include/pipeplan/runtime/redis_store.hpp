// pipeplan/runtime/redis_store.hpp — the plan store on a Redis server (as DynaPipe's instruction
// store), through hiredis.
//
// Keys: "pipeplan:<job>:<iteration>:<rank>", values: sealed records (plan_store.hpp). A Redis
// SET is atomic, so a planner that dies mid-write leaves no key, and a reader never sees part
// of a plan (the checksum catches anything else). get() polls with a short backoff until the
// key exists or the timeout passes; a connection that fails (server down, restarting) is
// dropped and re-opened on the next poll, so a restarted server is picked up, and a server
// that stays down ends in timeout_error naming the address and the last connection error.
// One connection per redis_store, guarded by a mutex: give every thread its own store for
// parallel fetches (copies share nothing).
//
// hiredis is optional at build time: Meson defines PIPEPLAN_HAVE_HIREDIS and links it when
// found; without it, put() and get() throw pipeplan::error saying the Redis store is
// unavailable in this build, and everything else works.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "pipeplan/runtime/errors.hpp"
#include "pipeplan/runtime/plan_store.hpp"

#if defined(PIPEPLAN_HAVE_HIREDIS)
#include <hiredis/hiredis.h>
#endif

namespace pipeplan::runtime {

/// True when this build can talk to Redis.
[[nodiscard]] constexpr bool redis_available() noexcept {
#if defined(PIPEPLAN_HAVE_HIREDIS)
    return true;
#else
    return false;
#endif
}

class redis_store {
public:
    redis_store(std::string host, std::uint16_t port, timeout_ms io_timeout = timeout_ms(2000))
        : host_(std::move(host)), port_(port), io_timeout_(io_timeout) {}
    redis_store(const redis_store& o) : redis_store(o.host_, o.port_, o.io_timeout_) {}
    redis_store(redis_store&& o) noexcept : redis_store(std::move(o.host_), o.port_, o.io_timeout_) {}
    redis_store& operator=(const redis_store&) = delete;

    [[nodiscard]] std::string describe() const { return "redis://" + host_ + ":" + std::to_string(port_); }

    [[nodiscard]] static std::string key_of(const plan_key& key) {
        key.check();
        return "pipeplan:" + key.job + ":" + std::to_string(key.iteration) + ":" + std::to_string(key.rank);
    }

    /// Stores the plan; throws pipeplan::error naming the server when it cannot.
    void put(const plan_key& key, std::string_view bytes) {
        const std::string k = key_of(key), record = seal(bytes);
#if defined(PIPEPLAN_HAVE_HIREDIS)
        std::lock_guard lk(mu_);
        std::string why;
        if (!connect(why)) throw error("plan store " + describe() + ": cannot store " + key.str() + ": " + why);
        reply r(static_cast<redisReply*>(redisCommand(ctx_.get(), "SET %b %b", k.data(), k.size(), record.data(), record.size())));
        if (!r || r->type == REDIS_REPLY_ERROR) {
            why = r ? std::string(r->str, r->len) : std::string(ctx_->errstr);
            ctx_.reset();
            throw error("plan store " + describe() + ": cannot store " + key.str() + ": " + why);
        }
#else
        (void)k;
        (void)record;
        unavailable();
#endif
    }

    /// The plan of `key`, waiting up to `timeout` for it (and for the server).
    [[nodiscard]] std::string get(const plan_key& key, timeout_ms timeout) {
        const std::string k = key_of(key);
#if defined(PIPEPLAN_HAVE_HIREDIS)
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        auto pause = std::chrono::microseconds(500);
        std::string last_error = "no such key yet";
        for (;;) {
            {
                std::lock_guard lk(mu_);
                if (connect(last_error)) {
                    reply r(static_cast<redisReply*>(redisCommand(ctx_.get(), "GET %b", k.data(), k.size())));
                    if (!r) {
                        last_error = ctx_->errstr;
                        ctx_.reset();
                    } else if (r->type == REDIS_REPLY_STRING) {
                        return unseal(std::string_view(r->str, r->len), describe() + " key " + k);
                    } else if (r->type == REDIS_REPLY_ERROR) {
                        last_error = std::string(r->str, r->len);
                    } else {
                        last_error = "no such key yet";
                    }
                }
            }
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline)
                throw timeout_error("plan store " + describe() + ": plan " + key.str() + " not available after " +
                                    std::to_string(timeout.count()) + " ms (" + last_error + ")");
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
            pause = std::min(pause * 2, std::chrono::microseconds(50000));
        }
#else
        (void)k;
        (void)timeout;
        unavailable();
#endif
    }

private:
#if defined(PIPEPLAN_HAVE_HIREDIS)
    struct ctx_free {
        void operator()(redisContext* c) const noexcept { redisFree(c); }
    };
    struct reply_free {
        void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
    };
    using reply = std::unique_ptr<redisReply, reply_free>;

    /// Opens the connection if needed; false (and `why`) when the server cannot be reached.
    bool connect(std::string& why) {
        if (ctx_) return true;
        timeval tv{static_cast<decltype(tv.tv_sec)>(io_timeout_.count() / 1000),
                   static_cast<decltype(tv.tv_usec)>((io_timeout_.count() % 1000) * 1000)};
        std::unique_ptr<redisContext, ctx_free> c(redisConnectWithTimeout(host_.c_str(), port_, tv));
        if (!c || c->err) {
            why = "cannot connect to " + describe() + ": " + (c ? std::string(c->errstr) : std::string("out of memory"));
            return false;
        }
        redisSetTimeout(c.get(), tv);
        ctx_ = std::move(c);
        return true;
    }
    std::unique_ptr<redisContext, ctx_free> ctx_;
#else
    [[noreturn]] void unavailable() const {
        throw error("plan store " + describe() + ": the Redis store is unavailable (pipeplan was built without hiredis; "
                    "install libhiredis-dev and reconfigure, or use dir:PATH)");
    }
#endif
    std::string host_;
    std::uint16_t port_;
    timeout_ms io_timeout_;
    std::mutex mu_;
};

static_assert(plan_store<redis_store>);

}  // namespace pipeplan::runtime
