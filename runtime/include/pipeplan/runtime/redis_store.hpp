// pipeplan/runtime/redis_store.hpp — the plan store on a Redis server (as DynaPipe's instruction
// store), through hiredis.
//
// Keys: "pipeplan:<job>:<iteration>:<rank>", values: sealed records (plan_store.hpp). A Redis
// SET is atomic, so a planner that dies mid-write leaves no key, and a reader never sees part
// of a plan (the checksum catches anything else). Every command runs under a deadline: get()
// polls with a short backoff until the key exists or its timeout passes, and each connect and
// reply wait is bounded by what is left of it (a server that accepts but never answers costs
// the caller's timeout, not more); put() retries under the store's I/O timeout. A connection
// that fails (server down, restarting, the client killed) is dropped and re-opened, for reads
// and writes alike; a server that stays down ends in timeout_error / error naming the address
// and the last connection error. With a password (set_auth), every connection sends AUTH
// (AUTH user password with a user name) before anything else; the password appears in no
// message. lock_writer(job) takes "pipeplan:<job>:writer" (SET NX PX with a random token and a
// lease, renewed by every put of the job, released by the lock object): a second writer of the
// job is refused while the lease lives. One connection per redis_store, guarded by a mutex:
// give every thread its own store for parallel fetches (copies share nothing).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include <unistd.h>

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
    redis_store(const redis_store& o)
        : host_(o.host_), port_(o.port_), io_timeout_(o.io_timeout_), user_(o.user_), password_(o.password_),
          secret_(o.secret_), lease_ms_(o.lease_ms_) {}
    redis_store(redis_store&& o) noexcept : redis_store(static_cast<const redis_store&>(o)) {}
    redis_store& operator=(const redis_store&) = delete;

    /// Authenticate every connection (AUTH [user] password); an empty password sends nothing.
    redis_store& set_auth(std::string user, std::string password) {
        user_ = std::move(user);
        password_ = std::move(password);
        return *this;
    }
    /// Sign records on put and require valid signatures on get (plan_store.hpp).
    redis_store& set_secret(store_secret secret) {
        secret_ = std::move(secret);
        return *this;
    }
    /// The lease of lock_writer (renewed by each put of the job).
    redis_store& set_writer_lease(timeout_ms lease) {
        lease_ms_ = lease;
        return *this;
    }

    /// "redis://[user@]HOST:PORT" — never the password.
    [[nodiscard]] std::string describe() const {
        return "redis://" + (user_.empty() ? std::string() : user_ + "@") + host_ + ":" + std::to_string(port_);
    }

    [[nodiscard]] static std::string key_of(const plan_key& key) {
        key.check();
        return "pipeplan:" + key.job + ":" + std::to_string(key.iteration) + ":" + std::to_string(key.rank);
    }

    /// Stores the plan; throws pipeplan::error naming the server when it cannot within the I/O
    /// timeout (dropped connections are re-opened and the SET repeated).
    void put(const plan_key& key, std::string_view bytes) {
        const std::string k = key_of(key), record = seal(bytes, key, secret_);
#if defined(PIPEPLAN_HAVE_HIREDIS)
        std::lock_guard lk(mu_);
        const auto deadline = std::chrono::steady_clock::now() + io_timeout_;
        if (key.job == lock_job_) renew_lease(deadline);
        command(deadline, "store " + key.str(), "SET %b %b", k.data(), k.size(), record.data(), record.size());
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
                if (connect(deadline, last_error)) {
                    set_timeout(deadline);
                    reply r(static_cast<redisReply*>(redisCommand(ctx_.get(), "GET %b", k.data(), k.size())));
                    if (!r) {
                        last_error = ctx_->errstr;
                        ctx_.reset();
                    } else if (r->type == REDIS_REPLY_STRING) {
                        return unseal(std::string_view(r->str, r->len), describe() + " key " + k, key, secret_);
                    } else if (r->type == REDIS_REPLY_ERROR) {
                        fail_unless_transient(std::string(r->str, r->len), "fetch " + key.str(), last_error);
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

    /// Makes this store the job's only writer while the returned lock lives (the store must
    /// outlive it); throws pipeplan::error naming the job when another writer's lease is live.
    [[nodiscard]] writer_lock lock_writer(const std::string& job) {
        plan_key{job, 0, 0}.check();
#if defined(PIPEPLAN_HAVE_HIREDIS)
        std::lock_guard lk(mu_);
        const std::string k = "pipeplan:" + job + ":writer", token = random_token();
        const auto deadline = std::chrono::steady_clock::now() + io_timeout_;
        const std::string lease = std::to_string(lease_ms_.count());
        reply r = command(deadline, "lock job '" + job + "'", "SET %b %b NX PX %b", k.data(), k.size(), token.data(),
                          token.size(), lease.data(), lease.size());
        if (r->type == REDIS_REPLY_NIL)
            throw error("plan store " + describe() + ": job '" + job + "' is being written by another planner (Redis key " + k +
                        " is held, its lease lasts up to " + lease + " ms after that planner's last write); one planner per job: "
                        "stop it or choose another job name");
        lock_job_ = job;
        lock_token_ = token;
        return writer_lock([this, k, token] {
            std::lock_guard lk2(mu_);
            const auto until = std::chrono::steady_clock::now() + io_timeout_;
            command(until, "unlock", "EVAL %s 1 %b %b", release_script, k.data(), k.size(), token.data(), token.size());
            lock_job_.clear();
        });
#else
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
    using clock = std::chrono::steady_clock;

    static constexpr const char* release_script =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    static constexpr const char* renew_script =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

    /// What is left until `deadline`, at least 10 ms (one exchange on a live server), as a timeval.
    static timeval remaining(clock::time_point deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock::now());
        const long long us = std::max<long long>(left.count(), 10000);
        return timeval{static_cast<decltype(timeval::tv_sec)>(us / 1000000), static_cast<decltype(timeval::tv_usec)>(us % 1000000)};
    }
    void set_timeout(clock::time_point deadline) { redisSetTimeout(ctx_.get(), remaining(deadline)); }

    /// Opens (and authenticates) the connection if needed, within the deadline; false and `why`
    /// when the server cannot be reached. A refused password throws: it will not get better.
    bool connect(clock::time_point deadline, std::string& why) {
        if (ctx_) return true;
        std::unique_ptr<redisContext, ctx_free> c(redisConnectWithTimeout(host_.c_str(), port_, remaining(deadline)));
        if (!c || c->err) {
            why = "cannot connect to " + describe() + ": " + (c ? std::string(c->errstr) : std::string("out of memory"));
            return false;
        }
        redisSetTimeout(c.get(), remaining(deadline));
        if (!password_.empty()) {
            reply r(static_cast<redisReply*>(
                user_.empty() ? redisCommand(c.get(), "AUTH %b", password_.data(), password_.size())
                              : redisCommand(c.get(), "AUTH %b %b", user_.data(), user_.size(), password_.data(), password_.size())));
            if (!r) {
                why = "authenticating with " + describe() + ": " + std::string(c->errstr);
                return false;
            }
            if (r->type == REDIS_REPLY_ERROR)
                throw error("plan store " + describe() + ": authentication refused (" + std::string(r->str, r->len) +
                            "): check the user and password of the store URL");
        }
        ctx_ = std::move(c);
        return true;
    }

    /// Throws for a server error that retrying cannot mend (NOAUTH, WRONGPASS, WRONGTYPE, ...);
    /// keeps `last` for LOADING / BUSY / TRYAGAIN.
    void fail_unless_transient(const std::string& err, const std::string& what, std::string& last) const {
        for (const char* t : {"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN"})
            if (err.rfind(t, 0) == 0) {
                last = err;
                return;
            }
        throw error("plan store " + describe() + ": cannot " + what + ": " + err +
                    (err.rfind("NOAUTH", 0) == 0 ? " (the server needs a password: redis://:PASSWORD@HOST:PORT)" : ""));
    }

    /// Runs one command until it gets a reply or `deadline` passes, re-opening dropped
    /// connections; throws pipeplan::error naming `what` on failure. The lock is held.
    template <class... A>
    reply command(clock::time_point deadline, const std::string& what, const char* format, A... args) {
        std::string why = "no reply";
        auto pause = std::chrono::milliseconds(5);
        for (;;) {
            if (connect(deadline, why)) {
                set_timeout(deadline);
                reply r(static_cast<redisReply*>(redisCommand(ctx_.get(), format, args...)));
                if (r && r->type != REDIS_REPLY_ERROR) return r;
                if (r) fail_unless_transient(std::string(r->str, r->len), what, why);
                else {
                    why = ctx_->errstr;
                    ctx_.reset();
                }
            }
            if (clock::now() >= deadline)
                throw error("plan store " + describe() + ": cannot " + what + " within " + std::to_string(io_timeout_.count()) +
                            " ms: " + why);
            std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - clock::now()));
            pause = std::min(pause * 2, std::chrono::milliseconds(200));
        }
    }

    /// Extends this writer's lease; throws when another writer took the job meanwhile.
    void renew_lease(clock::time_point deadline) {
        const std::string k = "pipeplan:" + lock_job_ + ":writer", lease = std::to_string(lease_ms_.count());
        reply r = command(deadline, "renew the writer lease of job '" + lock_job_ + "'", "EVAL %s 1 %b %b %b", renew_script,
                          k.data(), k.size(), lock_token_.data(), lock_token_.size(), lease.data(), lease.size());
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            throw error("plan store " + describe() + ": lost the writer lease of job '" + lock_job_ +
                        "' (it expired and another planner holds the job now); stopped writing");
    }

    static std::string random_token() {
        std::random_device rd;
        std::string t;
        for (int i = 0; i < 4; ++i) t += std::to_string(rd()) + "-";
        return t + std::to_string(::getpid());
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
    std::string user_, password_;
    store_secret secret_;
    timeout_ms lease_ms_{60000};
    std::string lock_job_, lock_token_;  ///< the job this store holds the writer lock of
    std::mutex mu_;
};

static_assert(plan_store<redis_store>);

}  // namespace pipeplan::runtime
