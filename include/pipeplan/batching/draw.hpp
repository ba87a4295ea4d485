// pipeplan/batching/draw.hpp — global batches drawn from length files as trainers draw them.
//
// A length pool is one or more CSV files of samples (`input_tokens,target_tokens`, other columns
// ignored; a `task` column, when present, names each sample's task: ../shared/data/lengths).
// A batch_drawer shuffles the pool with a seed (splitmix64 Fisher–Yates: the same batches on
// every platform) and takes samples in that order while the batch stays within the token
// budget (input + target tokens of the file, before any truncation); the next batch continues
// where the last stopped, and a pass that runs out reshuffles (the next epoch).
//
// Mixture weights (optional) name groups — tasks (the `task` column) or files (as given) — with
// non-negative weights: each sample's group is drawn by weight, then the group's own shuffled
// stream gives the sample. Groups not named are left out; a weight naming no group is an error.
//
//   auto pool = pipeplan::batching::read_length_pool({"superni_gpt.csv"});
//   pipeplan::batching::batch_drawer d(pool, {.tokens = 65536, .seed = 1});
//   std::vector<pipeplan::batching::sample> b0 = d.next(), b1 = d.next();
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/csv.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/random.hpp"

namespace pipeplan::batching {

/// The samples of one or more length files, with their file and task.
struct length_pool {
    std::vector<sample> samples;
    std::vector<std::string> files;      ///< the files, as given
    std::vector<std::string> tasks;      ///< distinct task names, in order of appearance
    std::vector<std::uint32_t> file_of;  ///< per sample: index into files
    std::vector<std::int32_t> task_of;   ///< per sample: index into tasks, -1 without a task column
};

/// Adds the samples of a parsed length table (file `source`) to `pool`. Throws input_error
/// naming the file, line and column of a bad cell (an empty or oversized sample included).
inline void add_length_table(length_pool& pool, const csv_table& t) {
    const std::vector<sample> samples = batch_from_table(t);  // the batch CSV's rules and errors
    const std::size_t task_col = t.find_column("task");
    const auto file = static_cast<std::uint32_t>(pool.files.size());
    pool.files.push_back(t.source());
    std::map<std::string, std::int32_t, std::less<>> task_index;
    for (std::size_t k = 0; k < pool.tasks.size(); ++k) task_index.emplace(pool.tasks[k], static_cast<std::int32_t>(k));
    for (std::size_t r = 0; r < samples.size(); ++r) {
        std::int32_t task = -1;
        if (task_col != csv_table::npos) {
            const std::string name(t.cell(r, task_col));
            auto it = task_index.find(name);
            if (it == task_index.end()) {
                it = task_index.emplace(name, static_cast<std::int32_t>(pool.tasks.size())).first;
                pool.tasks.push_back(name);
            }
            task = it->second;
        }
        pool.samples.push_back(samples[r]);
        pool.file_of.push_back(file);
        pool.task_of.push_back(task);
    }
}

/// Reads length files into one pool. Throws input_error (file, line, column) for an unreadable
/// or malformed file and invalid_argument when no file is given or the pool is empty.
[[nodiscard]] inline length_pool read_length_pool(const std::vector<std::filesystem::path>& files) {
    if (files.empty()) throw invalid_argument("length pool: no length file given");
    length_pool pool;
    for (const auto& f : files) add_length_table(pool, csv_table::read(f));
    if (pool.samples.empty()) throw invalid_argument("length pool: the length files hold no samples");
    return pool;
}

/// How batches are drawn.
struct draw_options {
    long long tokens = 65536;  ///< token budget of a global batch (input + target tokens), >= 1
    std::uint64_t seed = 1;
    /// Mixture weights by task or file name (see the file comment); empty = the pool as it is.
    std::vector<std::pair<std::string, double>> weights;
};

/// Draws consecutive global batches from a pool (see the file comment). Holds a reference to
/// the pool, which must outlive it.
class batch_drawer {
public:
    batch_drawer(const length_pool& pool, draw_options options) : pool_(pool), opt_(std::move(options)), rng_(opt_.seed) {
        if (opt_.tokens < 1) throw invalid_argument("token budget " + std::to_string(opt_.tokens) + " is invalid (must be >= 1)");
        if (pool_.samples.empty()) throw invalid_argument("length pool: no samples to draw from");
        if (opt_.weights.empty()) {
            groups_.resize(1);
            for (std::size_t i = 0; i < pool_.samples.size(); ++i) groups_[0].members.push_back(static_cast<std::uint32_t>(i));
            groups_[0].weight = 1.0;
        } else {
            build_groups();
        }
        for (auto& g : groups_) g.next = g.members.size();  // shuffled on first use
    }

    /// The next global batch: samples in the drawn order while their tokens stay within the
    /// budget (the sample that would exceed it opens the next batch; a sample longer than the
    /// whole budget forms a batch alone).
    [[nodiscard]] std::vector<sample> next() {
        std::vector<sample> out;
        long long have = 0;
        while (have < opt_.tokens) {
            if (!pending_) pending_ = take(pick_group());
            const sample& s = pool_.samples[*pending_];
            const long long len = static_cast<long long>(s.input_tokens) + s.target_tokens;
            if (!out.empty() && have + len > opt_.tokens) break;
            out.push_back(s);
            have += len;
            pending_.reset();
        }
        return out;
    }

private:
    struct group {
        std::vector<std::uint32_t> members;  ///< sample indices, shuffled per pass
        std::size_t next = 0;
        double weight = 0;
    };

    void build_groups() {
        double total = 0;
        for (const auto& [name, w] : opt_.weights) {
            if (!(w >= 0) || !std::isfinite(w))
                throw invalid_argument("mixture weight of '" + name + "' must be finite and >= 0 (got " + std::to_string(w) + ")");
            group g;
            g.weight = w;
            bool is_file = false;
            for (std::size_t f = 0; f < pool_.files.size(); ++f)
                if (pool_.files[f] == name) is_file = true;
            for (std::size_t i = 0; i < pool_.samples.size(); ++i) {
                const bool in = is_file ? pool_.files[pool_.file_of[i]] == name
                                        : pool_.task_of[i] >= 0 && pool_.tasks[static_cast<std::size_t>(pool_.task_of[i])] == name;
                if (in) g.members.push_back(static_cast<std::uint32_t>(i));
            }
            if (g.members.empty())
                throw invalid_argument("mixture weight names '" + name + "', which is neither a length file given nor a task in them");
            total += w;
            groups_.push_back(std::move(g));
        }
        if (!(total > 0)) throw invalid_argument("mixture weights sum to 0: give at least one positive weight");
    }

    std::size_t pick_group() {
        if (groups_.size() == 1) return 0;
        double total = 0;
        for (const auto& g : groups_) total += g.weight;
        const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
        double acc = 0;
        for (std::size_t k = 0; k < groups_.size(); ++k) {
            acc += groups_[k].weight;
            if (u < acc && groups_[k].weight > 0) return k;
        }
        for (std::size_t k = groups_.size(); k-- > 0;)
            if (groups_[k].weight > 0) return k;
        return 0;
    }

    std::uint32_t take(std::size_t k) {
        group& g = groups_[k];
        if (g.next == g.members.size()) {  // a new pass: Fisher–Yates
            for (std::size_t i = g.members.size(); i > 1; --i) std::swap(g.members[i - 1], g.members[rng_.below(i)]);
            g.next = 0;
        }
        return g.members[g.next++];
    }

    const length_pool& pool_;
    draw_options opt_;
    splitmix64 rng_;
    std::vector<group> groups_;
    std::optional<std::uint32_t> pending_;  ///< drawn, did not fit the last batch
};

}  // namespace pipeplan::batching
