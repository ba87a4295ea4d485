// pipeplan/batching/stage_cost.hpp — what one micro-batch costs the pipeline.
//
// A micro-batch's `t` is the time the bottleneck device spends on its forward and backward
// passes (over all the device's C chunks), `stored` the activation memory a device keeps for it
// until its backward, `peak` the device's peak activation memory while running it. Two
// accounting modes (docs/batching.md):
//
// pipeplan (default) — the real layout: device d runs the chunks k with k mod S = d; its time is
//   the sum over its layers (and embedding / LM head where it holds them) of forward + backward;
//   stored is the sum of stored activations; peak = stored + the largest (peak − stored) of a
//   component it holds (the other layers' activations are held while one layer runs). t, stored
//   and peak are the maxima over devices. Embedding / LM-head fields the model has no data for
//   (status unsupported) are not priced; an out-of-range answer makes the shape unpriceable.
//   Model states: per device, its layers' fp16 parameters plus the embedding (also on the LM-head
//   chunk, which keeps a tied copy), × 16 B/param with ZeRO sharding (cost/model_state.hpp).
//
// dynapipe — the published DynaPipe planner's accounting (`_get_time_and_memory_for_microbatch`
//   in DynaPipe's dynapipe/data_opt/dp_helper.cpp): stage time = L × (fwd + bwd) of one layer +
//   the LM head's fwd + bwd counted on every (decoder) stage; encoder-decoder: the max of the
//   encoder- and decoder-stage times (C = 1) or their sum × C/2 (C > 1); decoder-only with
//   C > 1: C × the stage time (t is per device; DynaPipe's code would halve it). Per-layer
//   stored s = max(encoder, decoder) (C = 1) or (encoder + decoder) × C/2 (C > 1); per-layer
//   peak p = max(encoder peak, decoder peak); stored = L × s, peak = p + (L − 1) × s.
//   Profiles should be read as DynaPipe reads them (profile_mode_for()). Model states:
//   (embedding + L × max(encoder, decoder layer parameters)) × 16 B/param, ZeRO-sharded.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/model_state.hpp"
#include "pipeplan/cost/profile_grid.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::batching {

/// The profile interpolation mode an accounting reads profiles with: `dynapipe` accounting
/// always reads them as DynaPipe does (interpolation_mode::dynapipe: maximum of repeats, linear
/// extrapolation below the grid, never-measured cells infeasible — DynaPipe's interpolation is
/// linear, so `linear` and `recommended` requests become it); `pipeplan` accounting uses
/// `requested`.
[[nodiscard]] constexpr interpolation_mode profile_mode_for(accounting_mode accounting,
                                                            interpolation_mode requested) noexcept {
    return accounting == accounting_mode::dynapipe ? interpolation_mode::dynapipe : requested;
}

/// The cost of one micro-batch to the pipeline (see the file comment).
struct microbatch_cost {
    double time_ms = 0;    ///< t: the bottleneck device's forward + backward time
    double stored_mb = 0;  ///< activations a device keeps until the backward (max over devices)
    double peak_mb = 0;    ///< peak activation memory of a device (max over devices)
    friend constexpr bool operator==(const microbatch_cost&, const microbatch_cost&) noexcept = default;
};

/// What one micro-batch costs one pipeline chunk (or one device: the sum of its chunks'
/// layers), in the `pipeplan` accounting: forward and backward time, stored activations and
/// the peak while it runs (stored + the largest transient excess of a component it holds).
struct chunk_cost {
    double forward_ms = 0;
    double backward_ms = 0;
    double stored_mb = 0;
    double peak_mb = 0;
};

namespace detail {
/// What stage_cost_evaluator::prepared_shape keeps per component: the model's prepared query
/// where it has one (prepared_cost_model), else nothing.
template <class Model, bool = prepared_cost_model<Model>>
struct prepared_part {
    struct type {};
};
template <class Model>
struct prepared_part<Model, true> {
    using type = typename Model::prepared_query;
};
}  // namespace detail

/// Prices micro-batch shapes for one model, pipeline configuration and accounting mode.
template <cost_model Model>
class stage_cost_evaluator {
    using prepared_part_t = typename detail::prepared_part<Model>::type;
    /// One component's price for one micro-batch.
    struct part {
        double f_ms = 0, b_ms = 0, stored_mb = 0, peak_mb = 0;
        estimate_status status = estimate_status::ok;
    };

public:
    /// Validates the configuration (invalid_argument) and keeps a reference to `model`.
    stage_cost_evaluator(const Model& model, pipeline_config config, accounting_mode mode)
        : model_(&model), config_(std::move(config)), mode_(mode), enc_dec_(model.is_encoder_decoder()) {
        config_.validate(enc_dec_);
        const auto chunks = config_.layout(enc_dec_);
        devices_.assign(static_cast<std::size_t>(config_.stages), load{});
        chunks_.assign(chunks.size(), load{});
        for (std::size_t k = 0; k < chunks.size(); ++k) {
            const auto& c = chunks[k];
            for (load* d : {&devices_[static_cast<std::size_t>(config_.device_of_chunk(static_cast<int>(k)))], &chunks_[k]}) {
                d->count[0] += c.encoder_layers;
                d->count[1] += c.decoder_layers;
                d->count[2] += c.embedding ? 1 : 0;
                d->count[3] += c.postprocess ? 1 : 0;
                d->head_copies += (c.postprocess && !c.embedding) ? 1 : 0;
            }
        }
        for (auto& d : devices_) d.index_held();
        for (auto& d : chunks_) d.index_held();
        for (const auto& d : devices_)
            for (std::size_t c = 0; c < 4; ++c) used_[c] = used_[c] || d.count[c] > 0;
        if (mode_ == accounting_mode::dynapipe) {
            used_ = {true, enc_dec_, false, true};
        }
        for (std::size_t c = 0; c < 4; ++c)
            if (used_[c]) used_list_[used_count_++] = static_cast<std::uint8_t>(c);
    }

    [[nodiscard]] const pipeline_config& config() const noexcept { return config_; }
    [[nodiscard]] accounting_mode mode() const noexcept { return mode_; }
    [[nodiscard]] bool encoder_decoder() const noexcept { return enc_dec_; }
    [[nodiscard]] const Model& model() const noexcept { return *model_; }

    /// The cost of a micro-batch of padded shape `s` under recomputation `r`; a status other
    /// than ok when the model cannot price it (e.g. beyond the profiled range).
    [[nodiscard]] estimate<microbatch_cost> evaluate(const microbatch_shape& s, recompute_mode r) const {
        std::array<part, 4> p{};
        if (const estimate_status st = price_all(s, r, p, nullptr); st != estimate_status::ok)
            return estimate<microbatch_cost>::failed(st);
        return cost_of(p);
    }

    /// Component prices shared by the prepared rows of shapes whose component queries have the
    /// same canonical query (canonical_cost_model: e.g. T5's encoder layers, priced at (m, E)
    /// for every decoder length D, and its LM head at (m, D)): each is priced once per
    /// micro-batch size. Filled by evaluate(prepared, m); one per thread.
    class part_memo {
        friend class stage_cost_evaluator;
        struct key {
            int comp, seqlen, dec_seqlen, recompute;
            friend bool operator==(const key&, const key&) noexcept = default;
        };
        struct key_hash {
            std::size_t operator()(const key& k) const noexcept {
                std::uint64_t h = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.seqlen)) << 32) |
                                  static_cast<std::uint32_t>(k.dec_seqlen);
                h ^= static_cast<std::uint64_t>(k.comp * 4 + k.recompute + 1) * 0x9e3779b97f4a7c15ULL;
                h ^= h >> 29;
                h *= 0xbf58476d1ce4e5b9ULL;
                return static_cast<std::size_t>(h ^ (h >> 32));
            }
        };
        std::unordered_map<key, std::vector<part>, key_hash> rows_;  ///< prices at m = 1, 2, ...
    };

    /// The lengths and recomputation of a row of shapes (m, E, D), m = 1, 2, ..., prepared
    /// once for evaluate(prepared, m) (models satisfying prepared_cost_model look their
    /// length axes up once; others are priced by evaluate(shape, r)).
    struct prepared_shape {
        microbatch_shape shape;
        recompute_mode recompute = recompute_mode::none;
        std::array<prepared_part_t, 4> parts{};
        /// Per component, its prices in a part_memo shared with other rows (nullptr: its own).
        std::array<std::vector<part>*, 4> shared{};
    };

    /// Prepares the shapes (m, seqlen, dec_seqlen) under `r` for evaluate(prepared, m); with a
    /// `memo`, the components whose prices ignore one of the lengths share their prices there.
    void prepare(int seqlen, int dec_seqlen, recompute_mode r, prepared_shape& out, part_memo* memo = nullptr) const {
        out.shape = microbatch_shape{1, seqlen, dec_seqlen};
        out.recompute = r;
        out.shared = {};
        if constexpr (prepared_cost_model<Model>) {
            for (std::size_t c = 0; c < 4; ++c) {
                if (!used_[c]) continue;
                const layer_query q = query_of(static_cast<component>(c), out.shape, r);
                model_->prepare(q, out.parts[c]);
                if constexpr (canonical_cost_model<Model>) {
                    const layer_query k = model_->canonical_query(q);
                    if (memo && (k.seqlen_tokens != q.seqlen_tokens || k.dec_seqlen_tokens != q.dec_seqlen_tokens))
                        out.shared[c] = &memo->rows_[typename part_memo::key{static_cast<int>(c), k.seqlen_tokens,
                                                                             k.dec_seqlen_tokens, static_cast<int>(r)}];
                }
            }
        }
    }

    /// evaluate({m, seqlen, dec_seqlen}, r) of a prepared row, bit for bit.
    [[nodiscard]] estimate<microbatch_cost> evaluate(const prepared_shape& ps, int m) const {
        if constexpr (!prepared_cost_model<Model>) {
            microbatch_shape s = ps.shape;
            s.mbs = m;
            return evaluate(s, ps.recompute);
        } else {
            std::array<part, 4> p{};
            for (unsigned u = 0; u < used_count_; ++u) {
                const std::size_t c = used_list_[u];
                if (std::vector<part>* row = ps.shared[c]) {
                    while (row->size() < static_cast<std::size_t>(m))
                        row->push_back(part_of(static_cast<component>(c),
                                               model_->evaluate(ps.parts[c], static_cast<int>(row->size()) + 1)));
                    p[c] = (*row)[static_cast<std::size_t>(m) - 1];
                } else {
                    p[c] = part_of(static_cast<component>(c), model_->evaluate(ps.parts[c], m));
                }
                if (p[c].status != estimate_status::ok) return estimate<microbatch_cost>::failed(p[c].status);
            }
            return cost_of(p);
        }
    }

    /// The most sizes evaluate_row() prices in one step.
    static constexpr std::size_t row_block = 16;

    /// evaluate(ps, m) at m = first + k into out[k], k = 0, 1, ..., bit for bit, up to n sizes or
    /// to the first size that cannot be priced: returns how many were priced (< n: size first +
    /// that count cannot be, its status in `failed`). A row_cost_model prices each component's
    /// sizes in one call, and the `pipeplan` accounting sums the devices' loads size by size in
    /// each step (the same operations per size, which the compiler vectorises across sizes).
    std::size_t evaluate_row(const prepared_shape& ps, int first, std::size_t n, microbatch_cost* out,
                             estimate_status& failed) const {
        std::size_t done = 0;
        while (done < n) {
            const std::size_t len = std::min(row_block, n - done);
            const std::size_t priced = evaluate_block(ps, first + static_cast<int>(done), len, out + done, failed);
            done += priced;
            if (priced < len) break;
        }
        return done;
    }

private:
    /// A component's prices at up to W sizes, one array per field (evaluate_row(): W = row_block;
    /// one size: W = 1).
    template <std::size_t W>
    struct part_lanes {
        std::array<double, W> f_ms, b_ms, stored_mb, peak_mb;
    };
    using part_block = part_lanes<row_block>;

    /// The components' prices of one size as lanes of width 1 (unused components: zeros).
    [[nodiscard]] static std::array<part_lanes<1>, 4> one_lane(const std::array<part, 4>& p) noexcept {
        std::array<part_lanes<1>, 4> out;
        for (std::size_t c = 0; c < 4; ++c) out[c] = {{p[c].f_ms}, {p[c].b_ms}, {p[c].stored_mb}, {p[c].peak_mb}};
        return out;
    }

    /// evaluate_row() of at most row_block sizes.
    std::size_t evaluate_block(const prepared_shape& ps, int first, std::size_t len, microbatch_cost* out,
                               estimate_status& failed) const {
        if constexpr (!row_cost_model<Model>) {
            for (std::size_t k = 0; k < len; ++k) {
                const auto c = evaluate(ps, first + static_cast<int>(k));
                if (!c.ok()) {
                    failed = c.status();
                    return k;
                }
                out[k] = c.value_or(microbatch_cost{});
            }
            return len;
        } else {
            // Only the used components' sizes before `ok` are set, and only those are read.
            std::array<part_block, 4> p;
            std::array<layer_cost, row_block> lc;
            std::size_t ok = len;  // the sizes before the first one a component cannot price
            for (unsigned u = 0; u < used_count_ && ok > 0; ++u) {
                const auto c = static_cast<component>(used_list_[u]);
                const auto take = [&](std::size_t k, const part& q) {
                    if (q.status != estimate_status::ok) {
                        failed = q.status;
                        ok = k;
                        return false;
                    }
                    part_block& to = p[used_list_[u]];
                    to.f_ms[k] = q.f_ms;
                    to.b_ms[k] = q.b_ms;
                    to.stored_mb[k] = q.stored_mb;
                    to.peak_mb[k] = q.peak_mb;
                    return true;
                };
                // take() stops each loop at the first size the component cannot price (`ok`
                // shrinks to it).
                if (std::vector<part>* row = ps.shared[used_list_[u]]) {
                    extend_memo_row(*row, c, ps.parts[used_list_[u]], first + static_cast<int>(ok) - 1);
                    const part* from = row->data() + (first - 1);
                    for (std::size_t k = 0, n = ok; k < n && take(k, from[k]); ++k) {}
                } else {
                    model_->evaluate_row(ps.parts[used_list_[u]], first, ok, lc.data());
                    for (std::size_t k = 0, n = ok; k < n && take(k, part_of(c, lc[k])); ++k) {}
                }
            }
            if (mode_ == accounting_mode::pipeplan) {
                cost_of_lanes(p, ok, out);
                return ok;
            }
            for (std::size_t k = 0; k < ok; ++k) {
                std::array<part, 4> one{};
                for (unsigned u = 0; u < used_count_; ++u) {
                    const part_block& q = p[used_list_[u]];
                    one[used_list_[u]] = part{q.f_ms[k], q.b_ms[k], q.stored_mb[k], q.peak_mb[k], estimate_status::ok};
                }
                out[k] = cost_of(one);
            }
            return ok;
        }
    }

    /// Prices a part_memo row (a component's prices at m = 1, 2, ...) up to size `last`.
    void extend_memo_row(std::vector<part>& row, component c, const prepared_part_t& prepared, int last) const
        requires row_cost_model<Model>
    {
        while (row.size() < static_cast<std::size_t>(last)) {
            std::array<layer_cost, row_block> lc;
            const std::size_t len = std::min(row_block, static_cast<std::size_t>(last) - row.size());
            model_->evaluate_row(prepared, static_cast<int>(row.size()) + 1, len, lc.data());
            for (std::size_t k = 0; k < len; ++k) row.push_back(part_of(c, lc[k]));
        }
    }

    /// The `pipeplan` accounting of `len` sizes (see the file comment): per size, the most loaded
    /// device's time (forward + backward), stored activations and peak (sum_load()).
    template <std::size_t W>
    void cost_of_lanes(const std::array<part_lanes<W>, 4>& p, std::size_t len, microbatch_cost* out) const noexcept {
        std::array<double, W> time, stored, peak;
        for (std::size_t k = 0; k < len; ++k) time[k] = stored[k] = peak[k] = 0;
        for (const auto& d : devices_) {
            load_sums<W> s;
            sum_load(d, p, len, s);
            for (std::size_t k = 0; k < len; ++k) {
                time[k] = std::max(time[k], s.f_ms[k] + s.b_ms[k]);
                stored[k] = std::max(stored[k], s.stored_mb[k]);
                peak[k] = std::max(peak[k], s.stored_mb[k] + s.excess_mb[k]);
            }
        }
        for (std::size_t k = 0; k < len; ++k) out[k] = microbatch_cost{time[k], stored[k], peak[k]};
    }

private:
    /// The micro-batch cost from its components' prices (see the file comment).
    [[nodiscard]] microbatch_cost cost_of(const std::array<part, 4>& p) const {
        microbatch_cost out;
        if (mode_ == accounting_mode::pipeplan) {
            cost_of_lanes(one_lane(p), 1, &out);
            return out;
        }
        const double L = config_.layers_per_stage;
        const double C = config_.virtual_chunks;
        const part& enc = p[0];
        const part& head = p[3];
        if (!enc_dec_) {
            out.time_ms = C * (L * (enc.f_ms + enc.b_ms) + (head.f_ms + head.b_ms));
            out.stored_mb = L * enc.stored_mb;
            out.peak_mb = enc.peak_mb + (L - 1) * enc.stored_mb;
        } else {
            const part& dec = p[1];
            const double enc_t = L * (enc.f_ms + enc.b_ms);
            const double dec_t = L * (dec.f_ms + dec.b_ms) + (head.f_ms + head.b_ms);
            const bool one_chunk = config_.virtual_chunks == 1;
            out.time_ms = one_chunk ? std::max(enc_t, dec_t) : (enc_t + dec_t) * C / 2;
            const double layer_stored_mb =
                one_chunk ? std::max(enc.stored_mb, dec.stored_mb) : (enc.stored_mb + dec.stored_mb) * C / 2;
            out.stored_mb = L * layer_stored_mb;
            out.peak_mb = std::max(enc.peak_mb, dec.peak_mb) + (L - 1) * layer_stored_mb;
        }
        return out;
    }

public:
    /// Model-state memory (MB) of the most loaded device under recomputation `r` (parameters
    /// may depend on it in a profile); unsupported when a layer's parameters are unknown.
    [[nodiscard]] estimate<double> model_state_mb(recompute_mode r) const {
        double fp16_mb = 0;
        if (mode_ == accounting_mode::dynapipe) {
            const auto emb = param(component::embedding, false, r);
            if (!emb.ok()) return emb;
            const auto enc = param(component::encoder, true, r);
            if (!enc.ok()) return enc;
            double layer = enc.value();
            if (enc_dec_) {
                const auto dec = param(component::decoder, true, r);
                if (!dec.ok()) return dec;
                layer = std::max(layer, dec.value());
            }
            fp16_mb = emb.value() + config_.layers_per_stage * layer;
        } else {
            for (const auto& d : devices_) {
                const estimate<double> mb = load_fp16_mb(d, r);
                if (!mb.ok()) return mb;
                fp16_mb = std::max(fp16_mb, mb.value());
            }
        }
        return model_state_from_fp16_mb(fp16_mb, config_.zero_stage, config_.dp).total_mb;
    }

    /// Number of pipeline chunks (S·C, in pipeline order; chunk k runs on device k mod S).
    [[nodiscard]] std::size_t chunks() const noexcept { return chunks_.size(); }

    /// Per pipeline chunk, what a micro-batch of shape `s` costs it (`pipeplan` accounting,
    /// chunk by chunk; the per-device costs of evaluate() are sums of these over a device's
    /// chunks). Fills `out` (one entry per chunk) and returns ok, or the failing status and, in
    /// `failed` (if given), the component that could not be priced.
    [[nodiscard]] estimate_status chunk_costs(const microbatch_shape& s, recompute_mode r, std::vector<chunk_cost>& out,
                                              component* failed = nullptr) const {
        require_chunk_layout("chunk_costs");
        std::array<part, 4> p{};
        out.clear();
        if (const estimate_status st = price_all(s, r, p, failed); st != estimate_status::ok) return st;
        out.reserve(chunks_.size());
        const auto lanes = one_lane(p);
        for (const auto& c : chunks_) {
            load_sums<1> sum;
            sum_load(c, lanes, 1, sum);
            out.push_back(chunk_cost{sum.f_ms[0], sum.b_ms[0], sum.stored_mb[0], sum.stored_mb[0] + sum.excess_mb[0]});
        }
        return estimate_status::ok;
    }

    /// Model-state memory (MB) of pipeline chunk `k`: its fp16 parameters (an LM-head chunk
    /// without its own embedding keeps a tied copy) × 16 B/param, ZeRO-sharded over dp.
    [[nodiscard]] estimate<double> chunk_model_state_mb(std::size_t k, recompute_mode r) const {
        require_chunk_layout("chunk_model_state_mb");
        const estimate<double> mb = load_fp16_mb(chunks_.at(k), r);
        if (!mb.ok()) return mb;
        return model_state_from_fp16_mb(mb.value(), config_.zero_stage, config_.dp).total_mb;
    }

private:
    /// What a device or a chunk holds.
    struct load {
        std::array<int, 4> count{};  // encoder layers, decoder layers, embeddings, heads
        int head_copies = 0;         // LM-head chunks without their own embedding
        // The components held (count > 0), ascending, with their counts: sum_load()'s terms.
        std::array<std::uint8_t, 4> held{};
        std::array<double, 4> held_count{};
        unsigned held_size = 0;
        void index_held() noexcept {
            held_size = 0;
            for (std::size_t c = 0; c < 4; ++c) {
                if (count[c] == 0) continue;
                held[held_size] = static_cast<std::uint8_t>(c);
                held_count[held_size++] = count[c];
            }
        }
    };

    void require_chunk_layout(const char* what) const {
        if (mode_ != accounting_mode::pipeplan)
            throw invalid_argument(std::string("stage_cost_evaluator::") + what + ": the '" +
                                   std::string(to_string(mode_)) +
                                   "' accounting has no per-chunk layout; use 'pipeplan' accounting");
    }

    /// Prices every component the accounting uses; the first failing one goes to `failed`.
    estimate_status price_all(const microbatch_shape& s, recompute_mode r, std::array<part, 4>& p,
                              component* failed) const {
        for (std::size_t c = 0; c < 4; ++c) {
            if (!used_[c]) continue;
            p[c] = price(static_cast<component>(c), s, r);
            if (p[c].status != estimate_status::ok) {
                if (failed) *failed = static_cast<component>(c);
                return p[c].status;
            }
        }
        return estimate_status::ok;
    }

    /// One load's sums at `len` sizes: per size, the sums of forward and backward times and of
    /// stored activations over the components it holds, and the largest transient excess
    /// (peak − stored) of one of them.
    template <std::size_t W>
    struct load_sums {
        std::array<double, W> f_ms, b_ms, stored_mb, excess_mb;
    };

    /// The `pipeplan` accounting of one load (a device or a chunk) at `len` sizes: its peak is
    /// stored + excess (load_sums). The one place the per-load sums are taken.
    template <std::size_t W>
    static void sum_load(const load& d, const std::array<part_lanes<W>, 4>& p, std::size_t len,
                         load_sums<W>& out) noexcept {
        for (std::size_t k = 0; k < len; ++k) out.f_ms[k] = out.b_ms[k] = out.stored_mb[k] = out.excess_mb[k] = 0;
        for (unsigned h = 0; h < d.held_size; ++h) {
            const part_lanes<W>& q = p[d.held[h]];
            const double n = d.held_count[h];
            for (std::size_t k = 0; k < len; ++k) {
                out.f_ms[k] += n * q.f_ms[k];
                out.b_ms[k] += n * q.b_ms[k];
                out.stored_mb[k] += n * q.stored_mb[k];
                out.excess_mb[k] = std::max(out.excess_mb[k], q.peak_mb[k] - q.stored_mb[k]);
            }
        }
    }

    /// Parameters of `c` (MB, fp16); an optional one the model does not know counts 0.
    [[nodiscard]] estimate<double> param(component c, bool required, recompute_mode r) const {
        const estimate<double> e = model_->parameter_mb(c, config_.tp, r);
        if (e.ok() || required) return e;
        return 0.0;
    }

    /// fp16 parameter memory of one load (its embeddings, tied head copies and layers).
    [[nodiscard]] estimate<double> load_fp16_mb(const load& d, recompute_mode r) const {
        const auto emb = param(component::embedding, false, r);
        if (!emb.ok()) return emb;
        double mb = (d.count[2] + d.head_copies) * emb.value();
        for (std::size_t c = 0; c < 2; ++c) {
            if (d.count[c] == 0) continue;
            const auto l = param(static_cast<component>(c), true, r);
            if (!l.ok()) return l;
            mb += d.count[c] * l.value();
        }
        return mb;
    }

    [[nodiscard]] layer_query query_of(component c, const microbatch_shape& s, recompute_mode r) const noexcept {
        layer_query q;
        q.comp = c;
        q.mbs = s.mbs;
        q.seqlen_tokens = s.seqlen_tokens;
        q.dec_seqlen_tokens = s.dec_seqlen_tokens;
        q.tp = config_.tp;
        q.recompute = r;
        return q;
    }

    [[nodiscard]] part price(component c, const microbatch_shape& s, recompute_mode r) const {
        return part_of(c, model_->evaluate(query_of(c, s, r)));
    }

    /// A component's price from the model's answer: unsupported optional fields count 0.
    [[nodiscard]] static part part_of(component c, const layer_cost& lc) noexcept {
        const bool layer = c == component::encoder || c == component::decoder;
        part out;
        const auto take = [&](const estimate<double>& e, double& into) {
            if (e.ok()) into = e.value_or(0.0);  // value() would keep its throwing path out of line
            else if (layer || e.status() != estimate_status::unsupported)
                out.status = std::max(out.status, e.status());
        };
        take(lc.forward_ms, out.f_ms);
        take(lc.backward_ms, out.b_ms);
        take(lc.stored_mb, out.stored_mb);
        take(lc.peak_mb, out.peak_mb);
        if (!lc.peak_mb.ok()) out.peak_mb = out.stored_mb;  // no transient data: no excess
        return out;
    }

    const Model* model_;
    pipeline_config config_;
    accounting_mode mode_;
    bool enc_dec_;
    std::vector<load> devices_;  // per device (the sum of its chunks)
    std::vector<load> chunks_;   // per pipeline chunk
    std::array<bool, 4> used_{};
    std::array<std::uint8_t, 4> used_list_{};  // the components used_, ascending
    unsigned used_count_ = 0;
};

}  // namespace pipeplan::batching
