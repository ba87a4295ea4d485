// The CUDA backend end to end (meson test --suite gpu): plans of the tiny model's shape run on
// the single-GPU stream transport with the CUDA MLP, checked against a single-stream reference
// (loss and every gradient to 1e-9 relative, doubles), dp 1 and 2, S 2 and 4; collectives of
// the stream transport; the NCCL transport with bootstrap through a directory store when two or
// more GPUs are present (a pipeline of one stage per GPU, checked against the reference too). With no usable device the executable prints why and exits 77 (SKIP).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "pipeplan/core/random.hpp"
#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/cuda/clock.hpp"
#include "pipeplan/runtime/cuda/mlp.hpp"
#include "pipeplan/runtime/cuda/nccl_transport.hpp"
#include "pipeplan/runtime/cuda/stream_transport.hpp"
#include "pipeplan/runtime/directory_store.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace pipeplan::runtime::cuda;
using namespace std::chrono_literals;

namespace {

struct batch {
    std::vector<std::size_t> lengths;
    cpu::replica_split split;
};

/// `mbs` micro-batches of 1-3 samples of 1-12 tokens per replica.
batch random_batch(std::size_t dp, std::size_t mbs, std::uint64_t seed) {
    splitmix64 rng(seed);
    batch b;
    b.split.resize(dp);
    for (std::size_t k = 0; k < dp; ++k)
        for (std::size_t m = 0; m < mbs; ++m) {
            std::vector<std::uint32_t> ids;
            for (std::size_t s = 0, n = 1 + rng.below(3); s < n; ++s) {
                ids.push_back(static_cast<std::uint32_t>(b.lengths.size()));
                b.lengths.push_back(1 + rng.below(12));
            }
            b.split[k].push_back(ids);
        }
    return b;
}

double max_relative_error(const std::vector<double>& got, const std::vector<double>& want, std::size_t hh,
                          std::size_t blocks) {
    double worst = 0;
    for (std::size_t b = 0; b < blocks; ++b) {
        double d = 0, n = 0;
        for (std::size_t i = b * hh; i < (b + 1) * hh; ++i) {
            d += (got[i] - want[i]) * (got[i] - want[i]);
            n += want[i] * want[i];
        }
        worst = std::max(worst, std::sqrt(d) / std::max(std::sqrt(n), 1e-300));
    }
    return worst;
}

/// Every built-in schedule: the plans the GPU runs, as the CPU backend's gradient test does.
constexpr schedule::schedule_name every_schedule[] = {
    schedule::schedule_name::gpipe,      schedule::schedule_name::one_f_one_b, schedule::schedule_name::interleaved,
    schedule::schedule_name::adaptive,   schedule::schedule_name::zb_h1,       schedule::schedule_name::merak_early,
    schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical, schedule::schedule_name::zb_v,
    schedule::schedule_name::v_half,     schedule::schedule_name::v_min,          schedule::schedule_name::dualpipe_v};

/// An instruction's kind, and its mode where it has one ("forward checkpoint").
std::string kind_and_mode(const plan::instruction& x) {
    const std::string_view mode = plan::mode_name(x);
    return plan::kind_name(x.kind) + (mode.empty() ? "" : " " + std::string(mode));
}

/// The CUDA model and the tiny-model shape plan_tiny sizes its buffers from (same hidden size
/// and block count), with the model's initial weights.
struct mlp_fixture {
    mlp_config c;
    cpu::model_config shape;
    std::vector<double> w;
};
mlp_fixture make_fixture(std::size_t hidden, std::size_t blocks) {
    mlp_fixture f;
    f.c.hidden = f.shape.hidden = hidden;
    f.c.blocks = f.shape.blocks = blocks;
    f.w = mlp_init(f.c);
    return f;
}

/// Runs plan `p` on one GPU (every rank a thread with its own streams); returns replica 0's
/// gradients assembled by block, the summed loss and the largest replica divergence.
struct run_result {
    mlp_result r;
    double divergence = 0;
};
/// With `clocks`, each rank registers a cuda::stream_clock whose setter records the clock;
/// (*clocks)[r] receives the clocks rank r applied, in stream order.
run_result run_on_one_gpu(const mlp_config& c, const std::vector<double>& w, const plan::execution_plan& p,
                          const std::vector<std::size_t>& lengths,
                          std::vector<std::vector<std::uint64_t>>* clocks = nullptr) {
    const std::size_t ranks = p.programs.size();
    gpu_hub hub(ranks);
    std::vector<mlp_rank> models;
    for (std::size_t r = 0; r < ranks; ++r) models.emplace_back(c, w);
    // The clocks outlive the streams' work: they are read after finish_step().
    std::vector<std::unique_ptr<cuda::stream_clock>> stream_clocks(ranks);
    if (clocks != nullptr)
        for (auto& k : stream_clocks) k = std::make_unique<cuda::stream_clock>(cuda_host_launcher{}, [](std::uint64_t) {});
    const auto plans = cpu::rank_plans(p);
    std::vector<std::string> errors(ranks);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < ranks; ++r)
        ts.emplace_back([&, r] {
            try {
                check(cudaSetDevice(hub.device()), "cudaSetDevice");
                auto t = hub.endpoint(r);
                models[r].begin(plans[r], lengths, static_cast<cudaStream_t>(t.compute_stream()));
                handler_registry handlers = models[r].handlers();
                if (stream_clocks[r]) stream_clocks[r]->register_on(handlers);
                executor<stream_transport, device_arena> ex(t, handlers, {30s, true});
                ex.run(plans[r]);
            } catch (const std::exception& e) {
                errors[r] = e.what();
                hub.abort(e.what());
            }
        });
    for (auto& t : ts) t.join();
    for (std::size_t r = 0; r < ranks; ++r) REQUIRE_MESSAGE(errors[r].empty(), "rank ", r, ": ", errors[r]);
    hub.finish_step(30s);
    if (clocks != nullptr) {
        clocks->assign(ranks, {});
        for (std::size_t r = 0; r < ranks; ++r) {
            stream_clocks[r]->rethrow();
            (*clocks)[r] = stream_clocks[r]->take_applied_mhz();
        }
    }
    run_result out;
    out.r.grads.assign(w.size(), 0.0);
    const std::size_t hh = c.hidden * c.hidden, devices = p.header.devices;
    std::vector<mlp_result> got;
    for (std::size_t r = 0; r < ranks; ++r) got.push_back(models[r].result());
    for (std::size_t r = 0; r < ranks; ++r) {
        out.r.loss += got[r].loss;
        for (const auto& l : models[r].owned())
            for (std::size_t i = l.first_block * hh; i < l.end_block * hh; ++i) {
                if (r < devices) out.r.grads[i] = got[r].grads[i];
                else
                    out.divergence = std::max(out.divergence, std::abs(got[r].grads[i] - got[r % devices].grads[i]));
            }
    }
    return out;
}

}  // namespace

TEST_CASE("gpu: plan-driven runs on one GPU give the single-stream reference's loss and gradients") {
    const mlp_fixture f = make_fixture(16, 8);
    const mlp_config& c = f.c;
    const cpu::model_config& shape = f.shape;
    const std::vector<double>& w = f.w;
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    int runs = 0;
    std::map<std::string, int> kinds;  // the instruction kinds and modes these plans ran
    for (std::size_t dp : {1, 2})
        for (std::size_t devices : {2, 4})
            for (auto name : every_schedule) {
                CAPTURE(dp);
                CAPTURE(devices);
                CAPTURE(schedule::to_string(name));
                const batch b = random_batch(dp, 2 * devices + 1, 10 * devices + dp);
                cpu::tiny_plan_options o;
                o.schedule = name;
                o.devices = devices;
                o.sends = plan::send_rule::grouped;  // the CUDA transports group their starts
                o.overlap_factor = 0.5;              // dualpipe-v's plans then hold overlap_f_b pairs
                const plan::execution_plan p = cpu::plan_tiny(shape, b.split, b.lengths, o);
                for (const auto& prog : p.programs)
                    for (const auto& x : prog.instructions) ++kinds[kind_and_mode(x)];
                const mlp_result ref = mlp_reference(c, w, b.lengths, s);
                const run_result got = run_on_one_gpu(c, w, p, b.lengths);
                CHECK(std::abs(got.r.loss - ref.loss) <= 1e-9 * ref.loss);
                CHECK(max_relative_error(got.r.grads, ref.grads, c.hidden * c.hidden, c.blocks) <= 1e-9);
                CHECK(got.divergence == 0.0);  // one kernel hands every replica the same sum
                ++runs;
            }
    CHECK(runs == 2 * 2 * static_cast<int>(std::size(every_schedule)));
    // Every way the model meets a plan ran: both forward modes, recompute, whole and split
    // backwards, overlapped pairs.
    for (const char* k : {"forward store", "forward checkpoint", "recompute", "backward whole", "backward input_only",
                          "backward_weight", "overlap_f_b"})
        CHECK_MESSAGE(kinds[k] > 0, k);
    check(cudaStreamDestroy(s), "cudaStreamDestroy");
}

TEST_CASE("gpu: set_frequency through cuda::stream_clock runs in stream order; training is unchanged") {
    const mlp_fixture f = make_fixture(16, 4);
    const mlp_config& c = f.c;
    const cpu::model_config& shape = f.shape;
    const std::vector<double>& w = f.w;
    const batch b = random_batch(1, 5, 3);
    cpu::tiny_plan_options o;
    o.schedule = schedule::schedule_name::one_f_one_b;
    o.devices = 2;
    o.sends = plan::send_rule::grouped;
    plan::execution_plan p = cpu::plan_tiny(shape, b.split, b.lengths, o);
    // A set_frequency before every compute op, alternating 1200 / 1500 MHz per rank.
    std::vector<std::vector<std::uint64_t>> want(p.programs.size());
    for (std::size_t r = 0; r < p.programs.size(); ++r) {
        std::vector<plan::instruction> out;
        for (const auto& x : p.programs[r].instructions) {
            if (plan::is_compute(x.kind)) {
                const std::uint32_t mhz = want[r].size() % 2 == 0 ? 1200 : 1500;
                out.push_back(plan::make_set_frequency(mhz, x));
                want[r].push_back(mhz);
            }
            out.push_back(x);
        }
        p.programs[r].instructions = std::move(out);
    }
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    const mlp_result ref = mlp_reference(c, w, b.lengths, s);
    check(cudaStreamDestroy(s), "cudaStreamDestroy");
    std::vector<std::vector<std::uint64_t>> applied;
    const run_result got = run_on_one_gpu(c, w, p, b.lengths, &applied);
    CHECK(std::abs(got.r.loss - ref.loss) <= 1e-9 * ref.loss);
    CHECK(max_relative_error(got.r.grads, ref.grads, c.hidden * c.hidden, c.blocks) <= 1e-9);
    CHECK(applied == want);
}

TEST_CASE("gpu: stream transport collectives sum in member order; mismatched counts abort") {
    constexpr std::size_t n = 3, count = 1000;
    gpu_hub hub(n);
    std::vector<device_arena> mem(n);
    std::vector<std::vector<double>> host(n, std::vector<double>(count));
    for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < count; ++i) host[r][i] = 0.1 * double(r + 1) + double(i);
        check(cudaMemcpy(doubles(mem[r], count), host[r].data(), count * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    const std::vector<std::size_t> group{0, 1, 2};
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < n; ++r)
        ts.emplace_back([&, r] {
            check(cudaSetDevice(hub.device()), "cudaSetDevice");
            auto t = hub.endpoint(r);
            t.all_reduce({mem[r].bytes().data(), count, plan::dtype::fp64}, group, 10s);
        });
    for (auto& t : ts) t.join();
    hub.finish_step(10s);
    for (std::size_t r = 0; r < n; ++r) {
        std::vector<double> got(count);
        check(cudaMemcpy(got.data(), mem[r].data(), count * 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (std::size_t i = 0; i < count; ++i) REQUIRE(got[i] == (host[0][i] + host[1][i]) + host[2][i]);
    }
}

TEST_CASE("gpu: NCCL transport bootstraps through a directory store, all-reduces and runs a pipeline plan (2+ GPUs)") {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices < 2) {
        MESSAGE("skipped: the NCCL test needs 2 or more GPUs, this machine has ", devices);
        return;
    }
    const std::size_t ranks = std::min(devices, 4);
    const auto dir = std::filesystem::temp_directory_path() / ("pipeplan_nccl_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    directory_store store(dir);
    std::vector<std::vector<double>> got(ranks);
    std::vector<std::string> errors(ranks);
    const mlp_fixture f = make_fixture(16, 8);
    const mlp_config& c = f.c;
    const cpu::model_config& shape = f.shape;
    const std::vector<double>& w = f.w;
    const batch b = random_batch(1, 2 * ranks + 1, 99);
    cpu::tiny_plan_options po;
    po.devices = ranks;
    po.sends = plan::send_rule::grouped;
    const auto plans = cpu::rank_plans(cpu::plan_tiny(shape, b.split, b.lengths, po));
    std::vector<mlp_result> results(ranks);
    std::vector<std::vector<cpu::stage_layout>> owned(ranks);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < ranks; ++r)
        ts.emplace_back([&, r] {
            try {
                nccl_options o;
                o.job = "gpu-test";
                o.device = static_cast<int>(r);
                o.timeout = 60s;
                auto t = nccl_transport::connect(store, r, ranks, ranks, o);  // one replica of `ranks` devices
                device_arena a;
                std::vector<double> v(64, double(r + 1));
                check(cudaMemcpy(doubles(a, v.size()), v.data(), v.size() * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
                std::vector<std::size_t> group;
                for (std::size_t k = 0; k < ranks; ++k) group.push_back(k);
                t.all_reduce({a.bytes().data(), v.size(), plan::dtype::fp64}, group, 60s);
                t.finish_step(60s);
                got[r].resize(v.size());
                check(cudaMemcpy(got[r].data(), a.data(), v.size() * 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
                // A pipeline of `ranks` stages over NCCL: the plan-driven gradients match.
                mlp_rank model(c, w);
                model.begin(plans[r], b.lengths, static_cast<cudaStream_t>(t.compute_stream()));
                executor<nccl_transport, device_arena> ex(t, model.handlers(), {60s, true});
                ex.run(plans[r]);
                t.finish_step(60s);
                results[r] = model.result();
                owned[r] = model.owned();
            } catch (const std::exception& e) {
                errors[r] = e.what();
            }
        });
    for (auto& t : ts) t.join();
    std::filesystem::remove_all(dir);
    mlp_result pipeline;
    pipeline.grads.assign(w.size(), 0.0);
    for (std::size_t r = 0; r < ranks; ++r) {
        REQUIRE_MESSAGE(errors[r].empty(), "rank ", r, ": ", errors[r]);
        CHECK(got[r] == std::vector<double>(64, double(r + 1)));  // dp = 1: the all-reduce is the identity
        pipeline.loss += results[r].loss;
        for (const auto& l : owned[r])
            for (std::size_t i = l.first_block * c.hidden * c.hidden; i < l.end_block * c.hidden * c.hidden; ++i)
                pipeline.grads[i] = results[r].grads[i];
    }
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    const mlp_result ref = mlp_reference(c, w, b.lengths, s);
    check(cudaStreamDestroy(s), "cudaStreamDestroy");
    CHECK(std::abs(pipeline.loss - ref.loss) <= 1e-9 * ref.loss);
    CHECK(max_relative_error(pipeline.grads, ref.grads, c.hidden * c.hidden, c.blocks) <= 1e-9);
}

static_assert(grouping_transport<nccl_transport> && streaming_transport<nccl_transport>);
static_assert(grouping_transport<stream_transport> && streaming_transport<stream_transport>);

int main(int argc, char** argv) {
    const device_query q = query_devices();
    if (q.count == 0) {
        std::printf("SKIP: no usable CUDA device (%s); the CUDA backend was compiled but not run\n", q.why_none.c_str());
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
