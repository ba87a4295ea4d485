// pipeplan/core/csv.hpp — a small, strict CSV reader that remembers where every cell came from.
//
// Used for every CSV pipeplan reads (profiles, batches). RFC 4180 quoting is supported
// (`"a, b"`, `""` for a quote inside a quoted field); a trailing CR is dropped; blank lines (also
// lines of only spaces and tabs) are skipped; a leading UTF-8 byte order mark is ignored. Every conversion error throws pipeplan::input_error naming file, line and column.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"

namespace pipeplan {

class csv_table {
public:
    /// Reads and parses a whole file. Throws input_error if it cannot be opened or is malformed.
    static csv_table read(const std::filesystem::path& path) {
        return parse(read_text_file(path), path.string());
    }

    /// Parses text; `source` names it in error messages (a path, or e.g. "<stdin>").
    static csv_table parse(std::string_view text, std::string source) {
        csv_table t;
        t.source_ = std::move(source);
        std::size_t pos = 0, line = 0;
        if (text.starts_with("\xEF\xBB\xBF")) pos = 3;  // a UTF-8 byte order mark is not data
        bool have_header = false;
        while (pos < text.size()) {
            ++line;
            const std::size_t start_line = line;
            std::vector<std::string> fields;
            std::string field;
            bool in_quotes = false, quoted = false;
            for (;;) {
                if (pos >= text.size()) {
                    if (in_quotes)
                        throw input_error(t.source_, start_line, "", "unterminated quoted field");
                    break;
                }
                const char ch = text[pos++];
                if (in_quotes) {
                    if (ch == '"') {
                        if (pos < text.size() && text[pos] == '"') {
                            field += '"';
                            ++pos;
                        } else {
                            in_quotes = false;
                        }
                    } else {
                        if (ch == '\n') ++line;
                        field += ch;
                    }
                } else if (ch == '"') {
                    if (!field.empty() || quoted)
                        throw input_error(t.source_, start_line, "",
                                          "stray quote inside unquoted field");
                    in_quotes = quoted = true;
                } else if (ch == ',') {
                    fields.push_back(std::move(field));
                    field.clear();
                    quoted = false;
                } else if (ch == '\n') {
                    break;
                } else {
                    if (quoted)
                        throw input_error(t.source_, start_line, "",
                                          "characters after a closing quote");
                    field += ch;
                }
            }
            if (!quoted && !field.empty() && field.back() == '\r') field.pop_back();
            fields.push_back(std::move(field));
            for (auto& f : fields) trim(f);
            if (fields.size() == 1 && fields[0].empty() && !quoted) continue;  // blank (or only spaces)
            if (!have_header) {
                t.header_ = std::move(fields);
                t.header_line_ = start_line;
                have_header = true;
                for (std::size_t i = 0; i < t.header_.size(); ++i)
                    for (std::size_t j = 0; j < i; ++j)
                        if (t.header_[i] == t.header_[j])
                            throw input_error(t.source_, start_line, printable(t.header_[i]),
                                              "duplicate column name in header");
                continue;
            }
            if (fields.size() != t.header_.size())
                throw input_error(t.source_, start_line, "",
                                  "expected " + std::to_string(t.header_.size()) +
                                      " fields (as in the header), found " +
                                      std::to_string(fields.size()));
            const std::size_t row_begin = t.chars_.size();
            t.row_begins_.push_back(row_begin);
            for (const auto& f : fields) {
                t.chars_ += f;
                if (t.chars_.size() - row_begin > std::numeric_limits<std::uint32_t>::max())
                    throw input_error(t.source_, start_line, "", "line longer than 4 GiB");
                t.cell_ends_.push_back(static_cast<std::uint32_t>(t.chars_.size() - row_begin));
            }
            t.lines_.push_back(start_line);
        }
        if (!have_header) throw input_error(t.source_, 0, "", "file is empty (no header line)");
        return t;
    }

    [[nodiscard]] const std::string& source() const noexcept { return source_; }
    [[nodiscard]] const std::vector<std::string>& header() const noexcept { return header_; }
    [[nodiscard]] std::size_t rows() const noexcept { return lines_.size(); }
    [[nodiscard]] std::size_t columns() const noexcept { return header_.size(); }
    /// 1-based line number in the source where data row `row` starts.
    [[nodiscard]] std::size_t line_of(std::size_t row) const { return lines_.at(row); }

    /// Index of a column, or npos.
    [[nodiscard]] std::size_t find_column(std::string_view name) const noexcept {
        for (std::size_t i = 0; i < header_.size(); ++i)
            if (header_[i] == name) return i;
        return npos;
    }
    /// Index of a required column; throws input_error listing the header when it is missing.
    [[nodiscard]] std::size_t column(std::string_view name) const {
        const std::size_t c = find_column(name);
        if (c == npos) {
            std::string have;
            for (const auto& h : header_) have += (have.empty() ? "" : ",") + h;
            throw input_error(source_, header_line_, std::string(name),
                              "missing required column (header is: " + printable(have, 200) + ")");
        }
        return c;
    }

    [[nodiscard]] std::string_view cell(std::size_t row, std::size_t col) const {
        if (row >= lines_.size() || col >= header_.size()) throw std::out_of_range("csv_table::cell");
        const std::size_t i = row * header_.size() + col;
        const std::size_t begin = col == 0 ? 0 : cell_ends_[i - 1];
        return std::string_view(chars_).substr(row_begins_[row] + begin, cell_ends_[i] - begin);
    }

    /// A finite number; throws input_error naming file, line and column otherwise.
    [[nodiscard]] double number(std::size_t row, std::size_t col) const {
        const std::string_view s = cell(row, col);
        double v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || !std::isfinite(v))
            fail(row, col, "expected a number, found '" + printable(s) + "'");
        return v;
    }
    /// A finite number >= 0.
    [[nodiscard]] double non_negative(std::size_t row, std::size_t col) const {
        const double v = number(row, col);
        if (v < 0) fail(row, col, "expected a non-negative number, found '" + printable(cell(row, col)) + "'");
        return v;
    }
    /// A finite number in [lo, hi]; `unit` (e.g. "ms") follows the range in the error.
    [[nodiscard]] double number_in(std::size_t row, std::size_t col, double lo, double hi, std::string_view unit = {}) const {
        const double v = number(row, col);
        if (v < lo || v > hi)
            fail(row, col, "expected a number in " + range_text(lo, hi) + (unit.empty() ? "" : " ") + std::string(unit) +
                               ", found '" + printable(cell(row, col)) + "'");
        return v;
    }
    /// An integer in [lo, hi].
    [[nodiscard]] std::int64_t integer(std::size_t row, std::size_t col,
                                       std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
        const std::string_view s = cell(row, col);
        std::int64_t v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc{} || p != s.data() + s.size())
            fail(row, col, "expected an integer, found '" + printable(s) + "'");
        if (v < lo || v > hi)
            fail(row, col, "value " + printable(s) + " is outside [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "]");
        return v;
    }

    /// Throws input_error for a cell: "file:line: column 'name': reason".
    [[noreturn]] void fail(std::size_t row, std::size_t col, const std::string& reason) const {
        throw input_error(source_, line_of(row), header_.at(col), reason);
    }

    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

private:
    static void trim(std::string& s) {
        const auto b = s.find_first_not_of(" \t");
        if (b == std::string::npos) {
            s.clear();
            return;
        }
        const auto e = s.find_last_not_of(" \t");
        s = s.substr(b, e - b + 1);
    }

    std::string source_;
    std::vector<std::string> header_;
    std::size_t header_line_ = 1;
    // The cells of every data row, row-major, concatenated (4 bytes of overhead per cell and 8
    // per row, so a table costs little more than its file): cell (r, c) ends cell_ends_[r * columns
    // + c] bytes after row_begins_[r] in chars_ and starts where cell (r, c - 1) ends.
    std::string chars_;
    std::vector<std::size_t> row_begins_;
    std::vector<std::uint32_t> cell_ends_;
    std::vector<std::size_t> lines_;
};

}  // namespace pipeplan
