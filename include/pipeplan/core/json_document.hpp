// pipeplan/core/json_document.hpp — the one JSON reading step of every pipeplan JSON reader
// (scenarios, plans): parses the text with nlohmann's SAX interface into an ordinary
// nlohmann::json value and records where each value starts, in one linear pass.
//
//   const json_document doc(text, "s.json");          // throws input_error on bad JSON
//   const nlohmann::json& j = doc.root();
//   doc.fail(j["stages"], "stages", "expected ...");   // "s.json:2:13: column 'stages': expected ..."
//
// - Errors name the file, line and column (1-based, in bytes) and, from the readers, the field
//   path; a syntax error or a number outside a double's range (`1e400`) is located where the
//   parser stopped.
// - Nesting deeper than `max_depth` (default 64) is an error at the bracket that exceeds it, so a
//   file nested a million deep is refused after reading 65 brackets.
// - Locations: nlohmann's SAX events carry no position, so the parser reads the text through an
//   iterator that publishes how far it has read; a value starts at the first byte after the
//   previous event that is not whitespace, ',' or ':'. Each byte is looked at a bounded number
//   of times, and a location is turned into line and column only for an error.
// - A key given twice in one object is an error (which value counts would be ambiguous).
// - The document keeps a view of `text`: the text must outlive it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/core/error.hpp"

namespace pipeplan {

/// A place in a text: 1-based line and column (in bytes).
struct text_position {
    std::size_t line = 0;
    std::size_t column = 0;
};

/// The line and column of byte `offset` of `text` (the end of the text when past it).
[[nodiscard]] inline text_position position_at(std::string_view text, std::size_t offset) {
    offset = std::min(offset, text.size());
    text_position p{1, 1};
    for (std::size_t k = 0; k < offset; ++k) {
        if (text[k] == '\n') {
            ++p.line;
            p.column = 1;
        } else {
            ++p.column;
        }
    }
    return p;
}

namespace detail {

/// A character iterator over a text that records, in `*read_to`, how far it was advanced.
class publishing_char_iterator {
public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    publishing_char_iterator() = default;
    publishing_char_iterator(const char* p, const char** read_to) : p_(p), read_to_(read_to) {}
    reference operator*() const { return *p_; }
    publishing_char_iterator& operator++() {
        *read_to_ = ++p_;
        return *this;
    }
    publishing_char_iterator operator++(int) {
        publishing_char_iterator old = *this;
        ++*this;
        return old;
    }
    friend bool operator==(const publishing_char_iterator& a, const publishing_char_iterator& b) { return a.p_ == b.p_; }

private:
    const char* p_ = nullptr;
    const char** read_to_ = nullptr;
};

/// The SAX handler: builds the value (as nlohmann's own DOM parser does) and notes where each
/// value starts.
class located_json_builder {
public:
    using json = nlohmann::json;

    /// Where one value starts: an array element (array, index) or any other value (node).
    struct mark {
        const json::array_t* array;
        std::size_t index;
        const json* node;
        std::size_t offset;
    };

    located_json_builder(std::string_view text, const char* const* read_to, const std::string& source,
                         std::size_t max_depth)
        : text_(text), read_to_(read_to), source_(source), max_depth_(max_depth) {}

    json root;
    std::vector<mark> marks;

    bool null() { return add(nullptr); }
    bool boolean(bool v) { return add(v); }
    bool number_integer(json::number_integer_t v) { return add(v); }
    bool number_unsigned(json::number_unsigned_t v) { return add(v); }
    bool number_float(json::number_float_t v, const json::string_t&) { return add(v); }
    bool string(json::string_t& v) { return add(std::move(v)); }
    bool binary(json::binary_t& v) { return add(json::binary(std::move(v))); }
    bool start_object(std::size_t) { return open(json::value_t::object); }
    bool start_array(std::size_t) { return open(json::value_t::array); }
    bool key(json::string_t& k) {
        auto& members = stack_.back()->get_ref<json::object_t&>();
        if (members.count(k) > 0) {  // which value would count is ambiguous: refused
            const text_position p = position_at(text_, value_start());
            throw input_error(source_, p.line, p.column, "", "invalid JSON: duplicate key '" + printable(k) + "' in an object");
        }
        member_ = &members[k];  // a map node: stays where it is
        scan_from_ = read_offset();
        return true;
    }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
        std::string what = e.what();
        const std::size_t tag_end = what.find("] ");
        if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
        const text_position p = position_at(text_, position > 0 ? position - 1 : 0);
        throw input_error(source_, p.line, p.column, "", "invalid JSON: " + what);
    }

private:
    [[nodiscard]] std::size_t read_offset() const { return static_cast<std::size_t>(*read_to_ - text_.data()); }

    /// The offset of the value just read: the first byte after the previous event that is not
    /// whitespace, ',' or ':'.
    std::size_t value_start() {
        std::size_t i = scan_from_;
        const std::size_t end = std::min(read_offset(), text_.size());
        while (i < end && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r' ||
                           text_[i] == ',' || text_[i] == ':'))
            ++i;
        return i;
    }

    template <class V>
    bool add(V&& v) {
        (void)place(json(std::forward<V>(v)));
        scan_from_ = read_offset();
        return true;
    }

    /// Puts `v` where the next value goes (root, array element, object member); notes its start.
    json* place(json&& v) {
        const std::size_t at = value_start();
        if (stack_.empty()) {
            root = std::move(v);
            marks.push_back({nullptr, 0, &root, at});
            return &root;
        }
        if (stack_.back()->is_array()) {
            auto& a = stack_.back()->get_ref<json::array_t&>();
            a.push_back(std::move(v));
            marks.push_back({&a, a.size() - 1, nullptr, at});
            return &a.back();
        }
        *member_ = std::move(v);
        marks.push_back({nullptr, 0, member_, at});
        return member_;
    }

    bool open(json::value_t kind) {
        const std::size_t at = value_start();
        if (stack_.size() >= max_depth_) {
            const text_position p = position_at(text_, at);
            throw input_error(source_, p.line, p.column, "",
                              "JSON nested deeper than " + std::to_string(max_depth_) + " levels");
        }
        stack_.push_back(place(json(kind)));
        scan_from_ = read_offset();
        return true;
    }

    bool close() {
        stack_.pop_back();
        scan_from_ = read_offset();
        return true;
    }

    std::string_view text_;
    const char* const* read_to_;
    const std::string& source_;
    std::size_t max_depth_;
    std::vector<json*> stack_;  // open containers; the innermost last
    json* member_ = nullptr;    // the object member the next value fills
    std::size_t scan_from_ = 0;
};

}  // namespace detail

/// A parsed JSON text with the start of every value (see the file comment).
class json_document {
public:
    static constexpr std::size_t default_max_depth = 64;

    /// Parses `text` (named `source` in errors); throws input_error on invalid JSON or nesting
    /// deeper than `max_depth`.
    json_document(std::string_view text, std::string source, std::size_t max_depth = default_max_depth)
        : text_(text), source_(std::move(source)) {
        const char* read_to = text.data();
        detail::located_json_builder b(text, &read_to, source_, max_depth);
        const detail::publishing_char_iterator first(text.data(), &read_to), last(text.data() + text.size(), &read_to);
        nlohmann::json::sax_parse(first, last, &b);
        root_ = std::move(b.root);  // the containers' storage moves with it: element addresses stay
        starts_.reserve(b.marks.size());
        for (const auto& m : b.marks) {
            const nlohmann::json* node = m.array != nullptr ? &(*m.array)[m.index] : m.node;
            starts_.emplace_back(node == &b.root ? &root_ : node, m.offset);
        }
        std::sort(starts_.begin(), starts_.end(),
                         [](const auto& a, const auto& b) { return std::less<>{}(a.first, b.first); });
    }
    json_document(const json_document&) = delete;
    json_document& operator=(const json_document&) = delete;

    [[nodiscard]] const nlohmann::json& root() const noexcept { return root_; }
    [[nodiscard]] const std::string& source() const noexcept { return source_; }

    /// Where value `v` (a value inside root()) starts; {0, 0} for a value not from this text.
    [[nodiscard]] text_position where(const nlohmann::json& v) const {
        const auto it = std::upper_bound(starts_.begin(), starts_.end(), &v, [](const nlohmann::json* p, const auto& s) {
            return std::less<>{}(p, s.first);
        });
        if (it == starts_.begin() || std::prev(it)->first != &v) return {};
        return position_at(text_, std::prev(it)->second);
    }

    /// Throws input_error naming the file, where `at` starts, the field path and the reason.
    [[noreturn]] void fail(const nlohmann::json& at, const std::string& field, const std::string& reason) const {
        const text_position p = where(at);
        throw input_error(source_, p.line, p.column, field, reason);
    }

private:
    std::string_view text_;
    std::string source_;
    nlohmann::json root_;
    std::vector<std::pair<const nlohmann::json*, std::size_t>> starts_;
};

}  // namespace pipeplan
