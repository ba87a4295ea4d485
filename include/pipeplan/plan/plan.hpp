// pipeplan/plan/plan.hpp — an execution plan: header, micro-batch table, per-rank programs.
//
// Ranks. A plan covers `devices` pipeline devices times `dp` data-parallel replicas:
// rank = replica * devices + device. The header's `stage_devices` maps each of the
// devices x chunks virtual stages to its device (every device runs `chunks` of them; the
// placement's name, e.g. "interleaved", only labels the map). Every replica runs the same
// schedule shape on its own micro-batches (micro-batch table entries carry their replica).
// `sends` records the send rule of the transport the plan is made for (send_rule.hpp): the
// validator checks deadlock freedom under it, and an executor refuses a plan whose rule does
// not cover its transport's.
//
// Buffers. `rank_program::buffers` is the rank's buffer table (instructions name buffers by
// their index, the slot); each buffer has an offset and a size inside the rank's arena of
// `arena_bytes` bytes, plus what it holds (role, micro-batch, stage) so that executors and
// debuggers can label it. `live_peak_bytes` is the largest total size of buffers live at one
// time (a lower bound on any arena); the buffer planner's arena is never below it.
//
// A rank can be shipped alone: `rank_plan` is the header plus one program (the per-rank files
// that `pipeplan plan --out` writes); `execution_plan` holds all programs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/names.hpp"
#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/send_rule.hpp"
#include "pipeplan/schedule/placement.hpp"

namespace pipeplan::plan {

/// Version of the plan layout written by this library (binary and JSON). Version 2 added
/// header.plan_id (and, in binary, the micro-batches' row sizes); version 3 stores the stage ->
/// device map and the send rule in the header; version 4 the device memory the plan was made
/// for and each rank's model state (the memory rule of validate.hpp). Readers read versions 1 to 4.
inline constexpr std::uint32_t plan_format_version = 4;

/// What a buffer holds.
enum class buffer_role : std::uint8_t {
    activation_in = 0,   ///< a stage's input activation (received, or produced on this rank)
    activation_out = 1,  ///< a stage's output activation, to send
    stash = 2,           ///< activations stored by forward / recompute for the backward
    grad_in = 3,         ///< gradient of a stage's output (received, or produced on this rank)
    grad_out = 4,        ///< gradient of a stage's input, to send
    workspace = 5,       ///< scratch of one op
};
inline constexpr std::size_t buffer_role_count = 6;
[[nodiscard]] constexpr auto enum_names(buffer_role) noexcept {
    return name_table<buffer_role, buffer_role_count>{"buffer role",
                                                      {{{buffer_role::activation_in, "activation_in"},
                                                        {buffer_role::activation_out, "activation_out"},
                                                        {buffer_role::stash, "stash"},
                                                        {buffer_role::grad_in, "grad_in"},
                                                        {buffer_role::grad_out, "grad_out"},
                                                        {buffer_role::workspace, "workspace"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(buffer_role r) noexcept { return name_of(r); }

/// One buffer of a rank's arena.
struct buffer {
    std::uint64_t offset_bytes = 0;
    std::uint64_t size_bytes = 0;
    buffer_role role = buffer_role::activation_in;
    std::uint32_t microbatch = 0;
    std::uint32_t stage = 0;

    friend bool operator==(const buffer&, const buffer&) noexcept = default;
};

/// One micro-batch: which samples, and the padded shape they run in.
struct microbatch_entry {
    std::uint32_t replica = 0;               ///< data-parallel replica that runs it
    std::vector<std::uint32_t> sample_ids;   ///< indices into the iteration's batch
    tensor_shape shape;                      ///< padded [size, seqlen, dec_seqlen, hidden]
    /// Packed micro-batch: samples per row (sample_ids lists them row by row; shape's size is the
    /// row count, each row padded to seqlen). Empty: one sample per row.
    std::vector<std::uint32_t> row_sizes;

    /// Whether row_sizes is empty or names shape.microbatch_size rows of >= 1 samples that hold
    /// exactly sample_ids (what both plan readers require).
    [[nodiscard]] bool rows_consistent() const noexcept {
        if (row_sizes.empty()) return true;
        std::uint64_t total = 0;
        for (auto n : row_sizes) {
            if (n == 0) return false;
            total += n;
        }
        return row_sizes.size() == shape.microbatch_size && total == sample_ids.size();
    }

    friend bool operator==(const microbatch_entry&, const microbatch_entry&) = default;
};

/// The program of one rank.
struct rank_program {
    std::uint32_t rank = 0;
    std::vector<instruction> instructions;
    std::vector<buffer> buffers;               ///< indexed by slot
    std::uint64_t arena_bytes = 0;             ///< planned arena size
    std::uint64_t live_peak_bytes = 0;         ///< largest simultaneously-live set

    friend bool operator==(const rank_program&, const rank_program&) = default;
};

/// What every rank's file repeats: the iteration's identity and the planner's predictions.
struct plan_header {
    std::uint32_t version = plan_format_version;
    std::uint64_t iteration = 0;
    std::uint32_t devices = 1;                 ///< pipeline devices per replica
    std::uint32_t dp = 1;                      ///< data-parallel replicas
    std::uint32_t chunks = 1;                  ///< virtual stages per device
    std::string placement = "linear";          ///< the placement's name (labels stage_devices)
    std::vector<std::uint32_t> stage_devices;  ///< [virtual stage] its device; empty: stage v on device v
    send_rule sends = send_rule::buffered;     ///< the transport semantics the plan is checked under
    std::string schedule;                      ///< the schedule's name, e.g. "adaptive"
    dtype type = dtype::fp16;                  ///< activation / gradient element type
    std::uint8_t zero_stage = 0;               ///< ZeRO stage (>= 2: reduce-scatter)
    double predicted_makespan_ms = 0.0;        ///< the cost model's simulated iteration time
    std::vector<double> predicted_peak_memory_mb;  ///< per rank, simulated (model state included)
    /// The device memory the plan was made for (MB = 10^6 bytes); 0 = none recorded (a plan
    /// built by hand, or a file of version 1 to 3): the memory rule is then not checked.
    double device_memory_mb = 0.0;
    /// Per rank, the model state its stages hold (MB: weights, gradients, optimizer state);
    /// arena + model state is what the rank allocates. Empty when device_memory_mb is 0.
    std::vector<double> model_state_mb;
    std::vector<microbatch_entry> microbatches;    ///< the micro-batch table
    /// The plan identity: a hash of the whole plan (plan/identity.hpp), equal in every rank file
    /// of one plan; 0 = not stamped (a plan built in memory, or a version 1 file).
    std::uint64_t plan_id = 0;

    [[nodiscard]] std::uint32_t ranks() const noexcept { return devices * dp; }
    [[nodiscard]] std::uint32_t virtual_stages() const noexcept { return devices * chunks; }
    /// Device of virtual stage v (v < virtual_stages(), and a sound map: placement_problem()).
    [[nodiscard]] std::uint32_t device_of_stage(std::uint32_t v) const noexcept {
        return stage_devices.empty() ? v : stage_devices[v];
    }
    [[nodiscard]] std::uint32_t device_of_rank(std::uint32_t rank) const noexcept { return rank % devices; }
    [[nodiscard]] std::uint32_t replica_of_rank(std::uint32_t rank) const noexcept { return rank / devices; }

    friend bool operator==(const plan_header&, const plan_header&) = default;
};

/// What rank `p` allocates on its device (MB = 10^6 bytes): its arena plus the model state the
/// header records for it (none recorded: the arena alone).
[[nodiscard]] inline double rank_memory_mb(const plan_header& h, const rank_program& p) noexcept {
    const double state_mb = p.rank < h.model_state_mb.size() ? h.model_state_mb[p.rank] : 0.0;
    return static_cast<double>(p.arena_bytes) / 1e6 + state_mb;
}

/// Whether the header records what the memory rule needs: a device memory > 0 and one model
/// state per rank (plans of format 4 made by the planner).
[[nodiscard]] inline bool records_memory(const plan_header& h) noexcept {
    return h.device_memory_mb > 0 && h.model_state_mb.size() == h.ranks();
}

/// Why a plan of format `version` is not read or run (readers read 1 to plan_format_version;
/// executors run plan_format_version only).
[[nodiscard]] inline std::string version_problem(std::uint32_t version) {
    const std::string v = "plan format version " + std::to_string(version);
    const std::string mine = " (" + std::to_string(plan_format_version) + ")";
    if (version > plan_format_version) return v + " is newer than this reader's" + mine + ": upgrade pipeplan";
    if (version == 0) return v + " does not exist";
    return v + " is older than this library's" + mine + ": plan the iteration again with this pipeplan";
}

/// Records `pl` in the header: devices, chunks, the placement's name and its stage -> device map.
inline void set_placement(plan_header& h, const schedule::stage_placement& pl) {
    h.devices = static_cast<std::uint32_t>(pl.devices());
    h.chunks = static_cast<std::uint32_t>(pl.chunks());
    h.placement = std::string(schedule::to_string(pl.kind()));
    h.stage_devices.resize(pl.virtual_stages());
    for (std::size_t v = 0; v < h.stage_devices.size(); ++v) h.stage_devices[v] = static_cast<std::uint32_t>(pl.device_of(v));
}

/// Gives a header read from a version 1 or 2 file, which names a schedule::placement_kind and
/// has no stage -> device map, that placement's map (its send rule stays buffered, the rule
/// those versions were checked under). Returns what is wrong, or "".
[[nodiscard]] inline std::string upgrade_placement(plan_header& h) {
    const auto kind = find_name<schedule::placement_kind>(h.placement);
    if (!kind) return "unknown placement '" + h.placement + "' (" + name_list<schedule::placement_kind>("|") + ")";
    if (h.devices == 0 || h.chunks == 0) return "devices and chunks must be >= 1";
    if (*kind == schedule::placement_kind::linear && h.chunks != 1) return "a linear placement has one chunk per device";
    set_placement(h, schedule::stage_placement{*kind, h.devices, h.chunks});
    return "";
}

/// What is wrong with the header's placement, or "" when it is sound: devices, dp and chunks
/// >= 1, and stage_devices either empty with one chunk, or devices x chunks entries that give
/// every device exactly `chunks` stages.
[[nodiscard]] inline std::string placement_problem(const plan_header& h) {
    if (h.devices == 0 || h.dp == 0 || h.chunks == 0) return "devices, dp and chunks must be >= 1";
    if (h.stage_devices.empty()) {
        if (h.chunks == 1) return "";
        return "no stage_devices map for " + std::to_string(h.chunks) + " chunks per device";
    }
    if (h.stage_devices.size() != std::uint64_t(h.devices) * h.chunks)
        return "stage_devices has " + std::to_string(h.stage_devices.size()) + " entries, devices x chunks is " +
               std::to_string(std::uint64_t(h.devices) * h.chunks);
    std::vector<std::uint32_t> held(h.devices, 0);
    for (std::size_t v = 0; v < h.stage_devices.size(); ++v) {
        const std::uint32_t d = h.stage_devices[v];
        if (d >= h.devices)
            return "stage_devices[" + std::to_string(v) + "] = " + std::to_string(d) + " is not a device (devices = " +
                   std::to_string(h.devices) + ")";
        if (++held[d] > h.chunks)
            return "device " + std::to_string(d) + " runs more than " + std::to_string(h.chunks) + " stages";
    }
    return "";
}

/// Whether `name` may stand in a plan file's header.schedule or header.placement: empty or a
/// portable name (core/names.hpp: the names the schedule registry accepts). Both plan readers
/// check it, so every plan that reads in one format can be written in the other.
[[nodiscard]] constexpr bool is_plan_name(std::string_view name) noexcept {
    return name.empty() || is_portable_name(name);
}

/// All ranks' programs of one iteration.
struct execution_plan {
    plan_header header;
    std::vector<rank_program> programs;        ///< programs[r].rank == r

    friend bool operator==(const execution_plan&, const execution_plan&) = default;
};

/// One rank's share of a plan (what a rank loads).
struct rank_plan {
    plan_header header;
    rank_program program;

    friend bool operator==(const rank_plan&, const rank_plan&) = default;
};

/// The share of rank r (throws nothing; r must be < programs.size()).
[[nodiscard]] inline rank_plan share_of(const execution_plan& p, std::size_t r) {
    return rank_plan{p.header, p.programs[r]};
}

}  // namespace pipeplan::plan
