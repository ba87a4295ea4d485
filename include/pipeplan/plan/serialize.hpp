// pipeplan/plan/serialize.hpp — the compact binary plan format (see docs/formats.md).
//
// Layout, all integers little-endian, doubles as their IEEE-754 bit pattern (u64):
//   magic "PPLAN\x1A\n\0" (8 bytes) | u32 format version | u32 program count |
//   u64 payload bytes | u64 FNV-1a-64 checksum of the payload | payload
// payload = header, then `program count` programs, each struct's fields in the order of its
// table in fields.hpp:
//   header  u32 plan version, u64 iteration, u32 devices, u32 dp, u32 chunks, str placement,
//           u32 n + u32[n] stage devices, u8 send rule, str schedule, u8 dtype, u8 zero stage,
//           f64 predicted makespan, u32 n + f64[n] predicted peaks, f64 device memory, u32 n +
//           f64[n] model states, u32 n + n micro-batches
//           (u32 replica, u32 k + u32[k] sample ids, 4 × u32 shape, u32 r + u32[r] samples
//           per packed row), u64 plan identity
//   program u32 rank, u64 arena bytes, u64 live peak bytes, u32 n + n buffers (u64 offset,
//           u64 size, u8 role, u32 mb, u32 stage), u32 n + n instructions (u8 kind, u8 mode,
//           u8 dtype, u8 reserved, u32 mb, u32 stage, i32 peer, u32 in, out, stash, work,
//           4 × u32 shape, u64 bytes (a set_frequency's clock_mhz): 56 bytes each)
//   str = u32 length + bytes; enums are their codes (u8).
// Writing is a pure function of the plan: equal plans give identical bytes on every machine.
// Readers read versions 1 to 4 (version 1: no row counts, read as unpacked; versions 1 and 2:
// the placement as a code and no stage -> device map or send rule, see read_header; versions 1
// to 3: no device memory or model states).
// Reading checks magic, version (a newer or unknown version is refused, naming both), payload
// length (a truncated file is refused), checksum (a corrupted one too), every enum's range
// and that nothing trails; errors are pipeplan::input_error naming the file, the field and
// the byte offset. Nothing is returned unless the whole file is sound.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/core/parallel.hpp"
#include "pipeplan/plan/fields.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::plan {

inline constexpr std::string_view binary_magic{"PPLAN\x1A\n\0", 8};
/// The binary layout's version: the frame's and the plan's (plan_format_version) move together.
inline constexpr std::uint32_t binary_format_version = plan_format_version;

/// FNV-1a's offset basis: the sum of no bytes.
inline constexpr std::uint64_t fnv1a64_basis = 0xcbf29ce484222325ull;

/// FNV-1a, 64 bit; `h` continues an earlier call's result (the FNV of bytes a + b is
/// fnv1a64(b, fnv1a64(a))).
[[nodiscard]] inline std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = fnv1a64_basis) noexcept {
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

namespace detail {

struct byte_writer {
    std::string out;
    template <class T>
    void uint(T v) {
        char bytes[sizeof(T)];  // little-endian whatever the host's order
        for (std::size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF);
        out.append(bytes, sizeof(T));
    }
    void f64(double x) { uint(std::bit_cast<std::uint64_t>(x)); }
    void str(std::string_view s) {
        uint(static_cast<std::uint32_t>(s.size()));
        out.append(s);
    }
};

/// byte_writer's interface, writing into a buffer sized beforehand (binary_bytes): no
/// capacity checks per field.
struct span_writer {
    char* at = nullptr;  ///< the next byte
    template <class T>
    void uint(T v) {
        char bytes[sizeof(T)];  // little-endian whatever the host's order; one store (at cannot alias it)
        for (std::size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF);
        std::memcpy(at, bytes, sizeof(T));
        at += sizeof(T);
    }
    void f64(double x) { uint(std::bit_cast<std::uint64_t>(x)); }
    void str(std::string_view s) {
        uint(static_cast<std::uint32_t>(s.size()));
        if (!s.empty()) std::memcpy(at, s.data(), s.size());
        at += s.size();
    }
};

/// byte_writer's interface, counting the bytes instead of writing them.
struct byte_counter {
    std::size_t bytes = 0;
    template <class T>
    void uint(T) {
        bytes += sizeof(T);
    }
    void f64(double) { bytes += 8; }
    void str(std::string_view s) { bytes += 4 + s.size(); }
};

/// The bytes put() writes for every value of T where they are the same for all (numbers,
/// shapes, structs of them: instructions, buffers), else 0.
template <class T>
[[nodiscard]] constexpr std::size_t fixed_binary_bytes() noexcept {
    if constexpr (plan_struct<T>) {
        std::size_t n = 0;
        bool fixed = true;
        for_each_field<T>([&](const auto& f) {
            const std::size_t b = fixed_binary_bytes<typename std::decay_t<decltype(f)>::value_type>();
            fixed = fixed && b > 0;
            n += b;
        });
        return fixed ? n : 0;
    } else if constexpr (is_std_vector<T> || std::is_same_v<T, std::string>) {
        return 0;
    } else if constexpr (std::is_same_v<T, tensor_shape>) {
        return 16;
    } else {
        return sizeof(T);
    }
}

/// Writes `v` (a field of type T; see fields.hpp for how each type is laid out) to a
/// byte_writer or span_writer, or counts its bytes with a byte_counter.
template <class W, class T>
void put(W& w, const T& v) {
    if constexpr (plan_struct<T>) {
        for_each_field<T>([&](const auto& f) {
            if (f.text == field_text::version) put(w, plan_format_version);  // the layout written
            else put(w, v.*f.member_of(v));
        });
    } else if constexpr (is_std_vector<T>) {
        w.uint(static_cast<std::uint32_t>(v.size()));
        if constexpr (std::is_same_v<W, byte_counter> && fixed_binary_bytes<typename T::value_type>() > 0)
            w.bytes += v.size() * fixed_binary_bytes<typename T::value_type>();
        else
            for (const auto& e : v) put(w, e);
    } else if constexpr (std::is_same_v<T, std::string>) {
        w.str(v);
    } else if constexpr (std::is_same_v<T, double>) {
        w.f64(v);
    } else if constexpr (std::is_same_v<T, tensor_shape>) {
        for (auto x : {v.microbatch_size, v.seqlen, v.dec_seqlen, v.hidden}) w.uint(x);
    } else if constexpr (std::is_enum_v<T>) {
        w.uint(static_cast<std::underlying_type_t<T>>(v));
    } else {
        w.uint(static_cast<std::make_unsigned_t<T>>(v));
    }
}

/// The bytes put() writes for `v`.
template <class T>
[[nodiscard]] std::size_t binary_bytes(const T& v) {
    byte_counter c;
    put(c, v);
    return c.bytes;
}

/// The bytes before a payload: magic, format version, program count, payload size, checksum.
inline constexpr std::size_t frame_head_bytes = 32;

/// The frame's head for `n` programs and a payload of `size` bytes whose FNV-1a is `sum`.
[[nodiscard]] inline std::string frame_head(std::size_t n, std::uint64_t size, std::uint64_t sum) {
    byte_writer w;
    w.out.append(binary_magic);
    w.uint(binary_format_version);
    w.uint(static_cast<std::uint32_t>(n));
    w.uint(size);
    w.uint(sum);
    return std::move(w.out);
}

/// The frame's head for `n` programs and the payload made of `pieces` in order.
[[nodiscard]] inline std::string frame_head(std::size_t n, const std::vector<std::string_view>& pieces) {
    std::uint64_t size = 0, sum = fnv1a64_basis;
    for (const std::string_view p : pieces) size += p.size(), sum = fnv1a64(p, sum);
    return frame_head(n, size, sum);
}

/// Writes `v` at `out` + `offset`, which must hold binary_bytes(v) more bytes; returns the end.
template <class T>
std::size_t put_at(std::string& out, std::size_t offset, const T& v) {
    span_writer w{out.data() + offset};
    put(w, v);
    return static_cast<std::size_t>(w.at - out.data());
}

/// The bytes of `v` as put() writes them.
template <class T>
[[nodiscard]] std::string payload_of(const T& v) {
    std::string out(binary_bytes(v), '\0');
    put_at(out, 0, v);
    return out;
}

/// The bytes of a frame (frame_head, then the payload: the header and the programs): the
/// payload is written in place after room for the head, which is filled in once it is known.
inline std::string frame(const plan_header& h, const rank_program* const* progs, std::size_t n) {
    std::size_t bytes = frame_head_bytes + binary_bytes(h);
    for (std::size_t i = 0; i < n; ++i) bytes += binary_bytes(*progs[i]);
    std::string out(bytes, '\0');
    std::size_t at = put_at(out, frame_head_bytes, h);
    for (std::size_t i = 0; i < n; ++i) at = put_at(out, at, *progs[i]);
    const std::string head = frame_head(n, {std::string_view(out).substr(frame_head_bytes)});
    out.replace(0, frame_head_bytes, head);
    return out;
}

/// Where a reader is in the plan: "programs[0].instructions[12].kind", built only for errors.
struct field_path {
    const field_path* parent = nullptr;
    std::string_view name;                 ///< "" for an element of an array
    std::size_t index = 0;                 ///< the element's index (name "")
    [[nodiscard]] std::string text() const {
        std::string s = parent == nullptr ? std::string() : parent->text();
        if (!name.empty()) return s.empty() ? std::string(name) : s + "." + std::string(name);
        return s + "[" + std::to_string(index) + "]";
    }
};

/// Bounds-checked little-endian reader; every failure names the file, field and offset.
struct byte_reader {
    std::string_view in;
    std::size_t pos = 0;
    std::string file;
    std::uint32_t format = binary_format_version;  ///< the frame's format version
    std::uint32_t plan = binary_format_version;    ///< the header's plan version, once read

    /// Whether the file holds field `f` (fields.hpp: `since`).
    template <class F>
    [[nodiscard]] bool holds(const F& f) const noexcept {
        return f.since <= (f.since_header ? plan : format);
    }

    [[noreturn]] void fail(const std::string& field, const std::string& why) const {
        throw input_error(file, 0, field, "at byte " + std::to_string(pos) + ": " + why);
    }
    [[noreturn, gnu::cold, gnu::noinline]] void fail(const field_path& at, const std::string& why) const { fail(at.text(), why); }
    template <class Path>
    void need(std::size_t n, const Path& field) const {
        if (in.size() - pos < n) [[unlikely]]
            fail(field, "truncated: needs " + std::to_string(n) + " more bytes, " + std::to_string(in.size() - pos) + " left");
    }
    template <class T, class Path = std::string>
    T uint(const Path& field) {
        need(sizeof(T), field);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
        pos += sizeof(T);
        return static_cast<T>(v);
    }
    /// A count of items of at least `item_bytes` each that must fit in what is left.
    template <class Path>
    std::uint32_t count(const Path& field, std::size_t item_bytes) {
        const auto n = uint<std::uint32_t>(field);
        if (item_bytes > 0 && n > (in.size() - pos) / item_bytes) [[unlikely]]
            fail(field, "count " + std::to_string(n) + " exceeds what the file holds");
        return n;
    }

    /// Reads `v` (a field of type T) at `at`, checking enums and names.
    template <class T>
    void get(T& v, const field_path& at, field_text text) {
        (void)text;  // names and slots only
        if constexpr (plan_struct<T>) {
            for_each_field<T>([&](const auto& f) {
                if (holds(f)) get(v.*f.member_of(v), field_path{&at, f.name}, f.text);
                if constexpr (std::is_same_v<typename std::decay_t<decltype(f)>::value_type, std::uint32_t>)
                    if (f.text == field_text::version) plan = v.*f.member;
            });
        } else if constexpr (is_std_vector<T>) {
            using E = typename T::value_type;
            v.resize(count(at, min_binary_bytes<E>()));
            for (std::size_t i = 0; i < v.size(); ++i) {
                if constexpr (plan_struct<E>) get(v[i], field_path{&at, "", i}, text);
                else get(v[i], at, text);  // a number's errors name the list
            }
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (text == field_text::placement && format < 3) {  // a schedule::placement_kind code
                schedule::placement_kind k{};
                get(k, at, field_text::plain);
                v = std::string(name_of(k));
                return;
            }
            const std::uint32_t n = count(at, 1);
            v.assign(in.substr(pos, n));
            pos += n;
            if ((text == field_text::name || text == field_text::placement) && !is_plan_name(v))
                fail(at, "expected at most 64 characters of [A-Za-z0-9_.+-], found '" + printable(v) + "'");
        } else if constexpr (std::is_same_v<T, double>) {
            v = std::bit_cast<double>(uint<std::uint64_t>(at));
        } else if constexpr (std::is_same_v<T, tensor_shape>) {
            for (auto* x : {&v.microbatch_size, &v.seqlen, &v.dec_seqlen, &v.hidden}) *x = uint<std::uint32_t>(at);
        } else if constexpr (std::is_same_v<T, instr_kind>) {
            v = static_cast<instr_kind>(uint<std::uint8_t>(at));
            if (is_unknown(v)) [[unlikely]]
                fail(at, "unknown instruction kind " + std::to_string(static_cast<unsigned>(v)));
        } else if constexpr (named_enum<T>) {
            const auto code = uint<std::underlying_type_t<T>>(at);
            v = static_cast<T>(code);
            if (name_of(v) == "?") [[unlikely]]
                fail(at, "value " + std::to_string(+code) + " out of range");
        } else {
            v = static_cast<T>(uint<std::make_unsigned_t<T>>(at));
        }
    }
};

/// The header, then the checks no single field can make alone. A version 1 or 2 header gets
/// the stage -> device map of its placement and the send rule those versions were checked
/// under (buffered).
inline plan_header read_header(byte_reader& r) {
    const field_path root{nullptr, "header"};
    plan_header h;
    r.get(h, root, field_text::plain);
    if (h.version > plan_format_version || h.version == 0 || (r.format == plan_format_version && h.version != r.format))
        r.fail("header.version", version_problem(h.version));
    if (h.devices == 0 || h.dp == 0 || h.chunks == 0) r.fail("header.devices", "devices, dp and chunks must be >= 1");
    if (r.format < 3)
        if (const std::string why = upgrade_placement(h); !why.empty()) r.fail("header.placement", why);
    for (std::size_t j = 0; j < h.microbatches.size(); ++j)
        if (!h.microbatches[j].rows_consistent())
            r.fail("header.microbatches[" + std::to_string(j) + "].row_sizes",
                   "the rows must number the shape's size and hold exactly the sample ids");
    if (h.devices == 0 || h.dp == 0 || h.chunks == 0) r.fail("header.devices", "devices, dp and chunks must be >= 1");
    if (const std::string why = placement_problem(h); !why.empty()) r.fail("header.stage_devices", why);
    return h;
}

inline rank_program read_program(byte_reader& r, std::size_t k) {
    const field_path root{nullptr, "programs"}, at{&root, "", k};
    rank_program p;
    r.get(p, at, field_text::plain);
    return p;
}

/// Parses a whole file: header and programs.
inline std::pair<plan_header, std::vector<rank_program>> parse_binary(std::string_view bytes, const std::string& file) {
    byte_reader r{bytes, 0, file};
    r.need(binary_magic.size(), "magic");
    if (bytes.substr(0, binary_magic.size()) != binary_magic) r.fail("magic", "not a pipeplan binary plan");
    r.pos = binary_magic.size();
    const auto version = r.uint<std::uint32_t>("format_version");
    if (version == 0 || version > binary_format_version) {
        r.pos = binary_magic.size();  // errors name the field's first byte
        r.fail("format_version", version_problem(version));
    }
    r.format = r.plan = version;
    const auto programs = r.uint<std::uint32_t>("program_count");
    const auto length = r.uint<std::uint64_t>("payload_bytes");
    const auto checksum = r.uint<std::uint64_t>("checksum");
    if (bytes.size() - r.pos < length)
        r.fail("payload", "truncated: the payload has " + std::to_string(bytes.size() - r.pos) + " of its " +
                              std::to_string(length) + " bytes");
    if (bytes.size() - r.pos > length) r.fail("payload", std::to_string(bytes.size() - r.pos - length) + " bytes after the payload");
    if (fnv1a64(bytes.substr(r.pos)) != checksum) r.fail("checksum", "checksum mismatch: the file is corrupted");
    std::pair<plan_header, std::vector<rank_program>> out;
    out.first = read_header(r);
    if (programs > (bytes.size() - r.pos) / min_binary_bytes<rank_program>())
        r.fail("program_count", "more programs than the file holds");
    for (std::uint32_t k = 0; k < programs; ++k) out.second.push_back(read_program(r, k));
    if (r.pos != bytes.size()) r.fail("payload", "bytes left after the last program");
    return out;
}

}  // namespace detail

/// The size of rank `r`'s binary rank file (to_binary(share_of(p, r)).size()), counted
/// without writing it.
[[nodiscard]] inline std::size_t rank_binary_bytes(const execution_plan& p, std::size_t r) {
    return detail::frame_head_bytes + detail::binary_bytes(p.header) + detail::binary_bytes(p.programs[r]);
}

/// A plan's binary payload in parts, each serialized once: the header's bytes and every
/// program's. The whole plan's file is frame_head(n, {header, programs...}) + header +
/// programs..., rank r's file frame_head(1, {header, programs[r]}) + header + programs[r]
/// (plan/directory.hpp writes rank files from the parts, plan/identity.hpp hashes them).
struct binary_parts {
    std::string header;
    std::vector<std::string> programs;
};

/// The parts of the plan of header `h` and `programs`, the programs serialized on up to
/// `threads` threads (core/parallel.hpp; the bytes do not depend on the count). With
/// `checksum`, also the FNV-1a of the whole payload (the header's bytes, then the programs' in
/// order), summed while the parts are made: one task makes the header, then sums each
/// program's bytes as soon as they are made (making one itself that no worker has taken yet),
/// while the other workers make the programs.
[[nodiscard]] inline binary_parts binary_parts_of(const plan_header& h, const std::vector<rank_program>& programs,
                                                  std::size_t threads = 1, std::uint64_t* checksum = nullptr) {
    const std::size_t n = programs.size();
    binary_parts parts;
    parts.programs.resize(n);
    std::vector<std::atomic<bool>> taken(n), made(n);  // made: also when making it threw
    const auto make = [&](std::size_t k) {
        if (taken[k].exchange(true, std::memory_order_acq_rel)) return false;
        struct mark_made {
            std::atomic<bool>& flag;
            ~mark_made() {
                flag.store(true, std::memory_order_release);
                flag.notify_all();
            }
        } mark{made[k]};
        parts.programs[k] = detail::payload_of(programs[k]);
        return true;
    };
    parallel_for(n + 1, threads, [&](std::size_t task, std::size_t) {
        if (task > 0) {
            (void)make(task - 1);
            return;
        }
        parts.header = detail::payload_of(h);
        if (checksum == nullptr) return;
        std::uint64_t sum = fnv1a64(parts.header);
        for (std::size_t k = 0; k < n; ++k) {
            if (!make(k)) made[k].wait(false, std::memory_order_acquire);  // a worker is making it
            sum = fnv1a64(parts.programs[k], sum);
        }
        *checksum = sum;
    });
    return parts;
}

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
