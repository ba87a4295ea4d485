// pipeplan/plan/serialize.hpp — the compact binary plan format (see docs/formats.md).
//
// Layout, all integers little-endian, doubles as their IEEE-754 bit pattern (u64):
//   magic "PPLAN\x1A\n\0" (8 bytes) | u32 format version | u32 program count |
//   u64 payload bytes | u64 FNV-1a-64 checksum of the payload | payload
// payload = header, then `program count` programs:
//   header  u32 plan version, u64 iteration, u32 devices, u32 dp, u32 chunks, u8 placement,
//           str schedule, u8 dtype, u8 zero stage, f64 predicted makespan, u32 n + f64[n]
//           predicted peaks, u32 n + n micro-batches (u32 replica, u32 k + u32[k] sample ids,
//           4 × u32 shape, u32 r + u32[r] samples per packed row; format version 1 files have
//           no row counts and are read as unpacked), u64 plan identity (plan version >= 2)
//   program u32 rank, u64 arena bytes, u64 live peak bytes, u32 n + n buffers (u64 offset,
//           u64 size, u8 role, u32 mb, u32 stage), u32 n + n instructions (u8 kind, u8 mode,
//           u8 dtype, u8 reserved, u32 mb, u32 stage, i32 peer, u32 in, out, stash, work,
//           4 × u32 shape, u64 bytes: 48 bytes each)
//   str = u32 length + bytes.
// Writing is a pure function of the plan: equal plans give identical bytes on every machine.
// Reading checks magic, version (a newer file is refused, naming both versions), payload
// length (a truncated file is refused), checksum (a corrupted one too), every enum's range
// and that nothing trails; errors are pipeplan::input_error naming the file, the field and
// the byte offset. Nothing is returned unless the whole file is sound.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::plan {

inline constexpr std::string_view binary_magic{"PPLAN\x1A\n\0", 8};
inline constexpr std::uint32_t binary_format_version = 2;

/// FNV-1a, 64 bit.
[[nodiscard]] inline std::uint64_t fnv1a64(std::string_view bytes) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

namespace detail {

struct byte_writer {
    std::string out;
    template <class T>
    void uint(T v) {
        for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF));
    }
    void f64(double x) { uint(std::bit_cast<std::uint64_t>(x)); }
    void str(std::string_view s) {
        uint(static_cast<std::uint32_t>(s.size()));
        out.append(s);
    }
};

inline void write_header(byte_writer& w, const plan_header& h) {
    w.uint(h.version);
    w.uint(h.iteration);
    w.uint(h.devices);
    w.uint(h.dp);
    w.uint(h.chunks);
    w.uint(static_cast<std::uint8_t>(h.placement));
    w.str(h.schedule);
    w.uint(static_cast<std::uint8_t>(h.type));
    w.uint(h.zero_stage);
    w.f64(h.predicted_makespan_ms);
    w.uint(static_cast<std::uint32_t>(h.predicted_peak_memory_mb.size()));
    for (double x : h.predicted_peak_memory_mb) w.f64(x);
    w.uint(static_cast<std::uint32_t>(h.microbatches.size()));
    for (const auto& m : h.microbatches) {
        w.uint(m.replica);
        w.uint(static_cast<std::uint32_t>(m.sample_ids.size()));
        for (auto id : m.sample_ids) w.uint(id);
        for (auto x : {m.shape.microbatch_size, m.shape.seqlen, m.shape.dec_seqlen, m.shape.hidden}) w.uint(x);
        w.uint(static_cast<std::uint32_t>(m.row_sizes.size()));
        for (auto n : m.row_sizes) w.uint(n);
    }
    if (h.version >= 2) w.uint(h.plan_id);
}

inline void write_program(byte_writer& w, const rank_program& p) {
    w.uint(p.rank);
    w.uint(p.arena_bytes);
    w.uint(p.live_peak_bytes);
    w.uint(static_cast<std::uint32_t>(p.buffers.size()));
    for (const auto& b : p.buffers) {
        w.uint(b.offset_bytes);
        w.uint(b.size_bytes);
        w.uint(static_cast<std::uint8_t>(b.role));
        w.uint(b.mb);
        w.uint(b.stage);
    }
    w.uint(static_cast<std::uint32_t>(p.instructions.size()));
    for (const auto& x : p.instructions) {
        w.uint(static_cast<std::uint8_t>(x.kind));
        w.uint(x.mode);
        w.uint(static_cast<std::uint8_t>(x.type));
        w.uint(x.reserved);
        w.uint(x.mb);
        w.uint(x.stage);
        w.uint(static_cast<std::uint32_t>(x.peer));
        for (auto s : {x.in, x.out, x.stash, x.work}) w.uint(s);
        for (auto v : {x.shape.microbatch_size, x.shape.seqlen, x.shape.dec_seqlen, x.shape.hidden}) w.uint(v);
        w.uint(x.bytes);
    }
}

inline std::string frame(const plan_header& h, const rank_program* const* progs, std::size_t n) {
    byte_writer payload;
    write_header(payload, h);
    for (std::size_t i = 0; i < n; ++i) write_program(payload, *progs[i]);
    byte_writer w;
    w.out.append(binary_magic);
    w.uint(binary_format_version);
    w.uint(static_cast<std::uint32_t>(n));
    w.uint(static_cast<std::uint64_t>(payload.out.size()));
    w.uint(fnv1a64(payload.out));
    w.out += payload.out;
    return std::move(w.out);
}

/// Bounds-checked little-endian reader; every failure names the file, field and offset.
struct byte_reader {
    std::string_view in;
    std::size_t pos = 0;
    std::string file;

    [[noreturn]] void fail(const std::string& field, const std::string& why) const {
        throw input_error(file, 0, field, "at byte " + std::to_string(pos) + ": " + why);
    }
    void need(std::size_t n, const std::string& field) const {
        if (in.size() - pos < n)
            fail(field, "truncated: needs " + std::to_string(n) + " more bytes, " + std::to_string(in.size() - pos) + " left");
    }
    template <class T>
    T uint(const std::string& field) {
        need(sizeof(T), field);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
        pos += sizeof(T);
        return static_cast<T>(v);
    }
    double f64(const std::string& field) { return std::bit_cast<double>(uint<std::uint64_t>(field)); }
    /// A count of items of at least `item_bytes` each that must fit in what is left.
    std::uint32_t count(const std::string& field, std::size_t item_bytes) {
        const auto n = uint<std::uint32_t>(field);
        if (item_bytes > 0 && n > (in.size() - pos) / item_bytes)
            fail(field, "count " + std::to_string(n) + " exceeds what the file holds");
        return n;
    }
    std::string str(const std::string& field) {
        const std::uint32_t n = count(field, 1);
        std::string s(in.substr(pos, n));
        pos += n;
        return s;
    }
    template <class E>
    E enumeration(const std::string& field, std::size_t limit) {
        const auto v = uint<std::uint8_t>(field);
        if (v >= limit) fail(field, "value " + std::to_string(v) + " out of range");
        return static_cast<E>(v);
    }
};

inline plan_header read_header(byte_reader& r, std::uint32_t format_version) {
    plan_header h;
    h.version = r.uint<std::uint32_t>("header.version");
    h.iteration = r.uint<std::uint64_t>("header.iteration");
    h.devices = r.uint<std::uint32_t>("header.devices");
    h.dp = r.uint<std::uint32_t>("header.dp");
    h.chunks = r.uint<std::uint32_t>("header.chunks");
    h.placement = r.enumeration<schedule::placement_kind>("header.placement", 3);
    h.schedule = r.str("header.schedule");
    if (!is_plan_schedule_name(h.schedule))
        r.fail("header.schedule", "expected at most 64 characters of [A-Za-z0-9_.+-], found '" + printable(h.schedule) + "'");
    h.type = r.enumeration<dtype>("header.dtype", dtype_names.size());
    h.zero_stage = r.uint<std::uint8_t>("header.zero_stage");
    h.predicted_makespan_ms = r.f64("header.predicted_makespan_ms");
    h.predicted_peak_memory_mb.resize(r.count("header.predicted_peak_memory_mb", 8));
    for (double& x : h.predicted_peak_memory_mb) x = r.f64("header.predicted_peak_memory_mb");
    h.microbatches.resize(r.count("header.microbatches", 24));
    for (std::size_t j = 0; j < h.microbatches.size(); ++j) {
        const std::string f = "header.microbatches[" + std::to_string(j) + "]";
        auto& m = h.microbatches[j];
        m.replica = r.uint<std::uint32_t>(f + ".replica");
        m.sample_ids.resize(r.count(f + ".sample_ids", 4));
        for (auto& id : m.sample_ids) id = r.uint<std::uint32_t>(f + ".sample_ids");
        for (auto* x : {&m.shape.microbatch_size, &m.shape.seqlen, &m.shape.dec_seqlen, &m.shape.hidden}) *x = r.uint<std::uint32_t>(f + ".shape");
        if (format_version >= 2) {
            m.row_sizes.resize(r.count(f + ".row_sizes", 4));
            for (auto& n : m.row_sizes) n = r.uint<std::uint32_t>(f + ".row_sizes");
            if (!m.rows_consistent()) r.fail(f + ".row_sizes", "the rows must number the shape's size and hold exactly the sample ids");
        }
    }
    if (h.version >= 2) h.plan_id = r.uint<std::uint64_t>("header.plan_id");
    if (h.devices == 0 || h.dp == 0 || h.chunks == 0) r.fail("header.devices", "devices, dp and chunks must be >= 1");
    return h;
}

inline rank_program read_program(byte_reader& r, std::size_t k) {
    const std::string f = "programs[" + std::to_string(k) + "]";
    rank_program p;
    p.rank = r.uint<std::uint32_t>(f + ".rank");
    p.arena_bytes = r.uint<std::uint64_t>(f + ".arena_bytes");
    p.live_peak_bytes = r.uint<std::uint64_t>(f + ".live_peak_bytes");
    p.buffers.resize(r.count(f + ".buffers", 25));
    for (std::size_t s = 0; s < p.buffers.size(); ++s) {
        const std::string g = f + ".buffers[" + std::to_string(s) + "]";
        auto& b = p.buffers[s];
        b.offset_bytes = r.uint<std::uint64_t>(g + ".offset_bytes");
        b.size_bytes = r.uint<std::uint64_t>(g + ".size_bytes");
        b.role = r.enumeration<buffer_role>(g + ".role", buffer_role_count);
        b.mb = r.uint<std::uint32_t>(g + ".mb");
        b.stage = r.uint<std::uint32_t>(g + ".stage");
    }
    p.instructions.resize(r.count(f + ".instructions", 56));
    for (std::size_t i = 0; i < p.instructions.size(); ++i) {
        const std::string g = f + ".instructions[" + std::to_string(i) + "]";
        auto& x = p.instructions[i];
        x.kind = static_cast<instr_kind>(r.uint<std::uint8_t>(g + ".kind"));
        if (is_unknown(x.kind)) r.fail(g + ".kind", "unknown instruction kind " + std::to_string(static_cast<unsigned>(x.kind)));
        x.mode = r.uint<std::uint8_t>(g + ".mode");
        x.type = r.enumeration<dtype>(g + ".dtype", dtype_names.size());
        x.reserved = r.uint<std::uint8_t>(g + ".reserved");
        x.mb = r.uint<std::uint32_t>(g + ".mb");
        x.stage = r.uint<std::uint32_t>(g + ".stage");
        x.peer = static_cast<std::int32_t>(r.uint<std::uint32_t>(g + ".peer"));
        for (auto* s : {&x.in, &x.out, &x.stash, &x.work}) *s = r.uint<std::uint32_t>(g + ".slot");
        for (auto* v : {&x.shape.microbatch_size, &x.shape.seqlen, &x.shape.dec_seqlen, &x.shape.hidden}) *v = r.uint<std::uint32_t>(g + ".shape");
        x.bytes = r.uint<std::uint64_t>(g + ".bytes");
    }
    return p;
}

/// Parses a whole file: header and programs.
inline std::pair<plan_header, std::vector<rank_program>> parse_binary(std::string_view bytes, const std::string& file) {
    byte_reader r{bytes, 0, file};
    r.need(binary_magic.size(), "magic");
    if (bytes.substr(0, binary_magic.size()) != binary_magic) r.fail("magic", "not a pipeplan binary plan");
    r.pos = binary_magic.size();
    const auto version = r.uint<std::uint32_t>("format_version");
    r.pos = binary_magic.size();  // errors name the field's first byte
    if (version > binary_format_version)
        r.fail("format_version", "format version " + std::to_string(version) + " is newer than this reader's (" +
                                     std::to_string(binary_format_version) + "); upgrade pipeplan");
    if (version == 0) r.fail("format_version", "format version 0 does not exist");
    r.pos += 4;
    const auto programs = r.uint<std::uint32_t>("program_count");
    const auto length = r.uint<std::uint64_t>("payload_bytes");
    const auto checksum = r.uint<std::uint64_t>("checksum");
    if (bytes.size() - r.pos < length)
        r.fail("payload", "truncated: the payload has " + std::to_string(bytes.size() - r.pos) + " of its " +
                              std::to_string(length) + " bytes");
    if (bytes.size() - r.pos > length) r.fail("payload", std::to_string(bytes.size() - r.pos - length) + " bytes after the payload");
    if (fnv1a64(bytes.substr(r.pos)) != checksum) r.fail("checksum", "checksum mismatch: the file is corrupted");
    std::pair<plan_header, std::vector<rank_program>> out;
    out.first = read_header(r, version);
    if (out.first.version > plan_format_version)
        r.fail("header.version", "plan version " + std::to_string(out.first.version) + " is newer than this reader's");
    if (programs > (bytes.size() - r.pos) / 36) r.fail("program_count", "more programs than the file holds");
    for (std::uint32_t k = 0; k < programs; ++k) out.second.push_back(read_program(r, k));
    if (r.pos != bytes.size()) r.fail("payload", "bytes left after the last program");
    return out;
}

}  // namespace detail

/// The binary form of one rank's share.
[[nodiscard]] inline std::string to_binary(const rank_plan& rp) {
    const rank_program* p = &rp.program;
    return detail::frame(rp.header, &p, 1);
}
/// The binary form of a whole plan (all programs in one file).
[[nodiscard]] inline std::string to_binary(const execution_plan& plan) {
    std::vector<const rank_program*> ps;
    for (const auto& p : plan.programs) ps.push_back(&p);
    return detail::frame(plan.header, ps.data(), ps.size());
}

/// Reads a binary plan holding any number of programs (`file` names it in errors).
[[nodiscard]] inline execution_plan execution_plan_from_binary(std::string_view bytes, const std::string& file = "<memory>") {
    auto [h, progs] = detail::parse_binary(bytes, file);
    return execution_plan{std::move(h), std::move(progs)};
}
/// Reads a binary rank file (exactly one program).
[[nodiscard]] inline rank_plan rank_plan_from_binary(std::string_view bytes, const std::string& file = "<memory>") {
    auto [h, progs] = detail::parse_binary(bytes, file);
    if (progs.size() != 1)
        throw input_error(file, 0, "program_count", "a rank file holds one program, this one " + std::to_string(progs.size()));
    return rank_plan{std::move(h), std::move(progs.front())};
}

/// Plan files above this size are refused unread (the largest plan measured, 256 ranks of a
/// 64-stage interleaved schedule, is far below it).
inline constexpr std::uint64_t max_plan_file_bytes = std::uint64_t(1) << 30;

/// Reads a whole plan file into memory: a regular file of at most max_plan_file_bytes (a FIFO,
/// device or directory is refused at once: input_error naming the path and what it is).
[[nodiscard]] inline std::string read_file_bytes(const std::filesystem::path& path) {
    return read_regular_file(path, regular_read_options{max_plan_file_bytes, true});
}

}  // namespace pipeplan::plan
