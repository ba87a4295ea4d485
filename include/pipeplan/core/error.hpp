// pipeplan/core/error.hpp — the exception types every tier throws.
//
// All pipeplan exceptions derive from pipeplan::error (itself a std::runtime_error), so a
// trainer can catch one type. Input problems carry the file, line and column that caused them.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace pipeplan {

/// `text` as it may appear inside a message: control characters (NUL included) are written
/// `\xNN`, and text longer than `max_bytes` is cut there and marked "... (N bytes)", so a binary
/// file or a 50 MB line never floods (or silently cuts) an error message.
[[nodiscard]] inline std::string printable(std::string_view text, std::size_t max_bytes = 80) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    const std::size_t n = text.size() > max_bytes ? max_bytes : text.size();
    out.reserve(n + 24);
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) {
            out.append("\\x").push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    if (n < text.size()) out.append("... (").append(std::to_string(text.size())).append(" bytes)");
    return out;
}

/// `x` as printf's %g writes it (e.g. "1e+12", "inf"), for messages that quote a value.
[[nodiscard]] inline std::string number_text(double x) {
    char buf[32];
    const int n = std::snprintf(buf, sizeof buf, "%g", x);
    return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

/// "[lo, hi]" with the numbers as printf's %g writes them (e.g. "[0, 1e+09]"), for messages
/// that quote an allowed range.
[[nodiscard]] inline std::string range_text(double lo, double hi) {
    return "[" + number_text(lo) + ", " + number_text(hi) + "]";
}

/// Base of every exception pipeplan throws. The message is kept printable: control characters
/// other than newline and tab are escaped and it is cut at 4096 bytes (see printable()).
class error : public std::runtime_error {
public:
    explicit error(const std::string& message) : std::runtime_error(clean(message)) {}
    explicit error(const char* message) : error(std::string(message)) {}

private:
    static std::string clean(const std::string& message) {
        bool plain = message.size() <= max_message_bytes;
        for (const char ch : message) {
            const auto c = static_cast<unsigned char>(ch);
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) plain = false;
        }
        if (plain) return message;
        std::string out;
        std::size_t begin = 0;
        // Keep newlines and tabs (multi-line messages), escape the rest piece by piece.
        for (std::size_t i = 0; i <= message.size() && out.size() < max_message_bytes; ++i) {
            if (i == message.size() || message[i] == '\n' || message[i] == '\t') {
                out += printable(std::string_view(message).substr(begin, i - begin), max_message_bytes);
                if (i < message.size()) out.push_back(message[i]);
                begin = i + 1;
            }
        }
        if (out.size() > max_message_bytes) {
            out.resize(max_message_bytes);
            out.append("... (message cut)");
        }
        return out;
    }
    static constexpr std::size_t max_message_bytes = 4096;
};

/// A caller passed a value outside the documented domain (an unknown name, a negative size...).
/// The message lists the valid choices where there is a finite set of them.
class invalid_argument : public error {
public:
    using error::error;
};

/// An option of a library call has a value outside its domain or one that contradicts the
/// other inputs. option() is the option's name as the library spells it (a member of an options
/// struct, e.g. "chunks"); what() reads "chunks 3 contradicts the scenario: ...". A front end
/// that spells its options otherwise shows named(its spelling): the CLI shows "--chunks 3 ...".
class option_error : public invalid_argument {
public:
    /// `text` holds "{}" where the option's name goes.
    option_error(std::string option, std::string text)
        : invalid_argument(fill(text, option)), option_(std::move(option)), text_(std::move(text)) {}

    [[nodiscard]] const std::string& option() const noexcept { return option_; }
    /// The message with the option spelled `name`.
    [[nodiscard]] std::string named(std::string_view name) const { return fill(text_, name); }

private:
    static std::string fill(const std::string& text, std::string_view name) {
        const auto at = text.find("{}");
        if (at == std::string::npos) return std::string(name) + ": " + text;
        return text.substr(0, at) + std::string(name) + text.substr(at + 2);
    }
    std::string option_, text_;
};

/// A plan does not fit a resource limit (e.g. a schedule's peak memory exceeds the device
/// memory limit). The CLI exits with status 3 on it.
class limit_exceeded : public error {
public:
    using error::error;
};

/// A file (or in-memory text) could not be read or is malformed. `file()`, `line()` (1-based,
/// 0 when the problem concerns the whole file) and `column()` (a column name, or empty) say
/// where; `what()` holds the full message "file:line: column 'c': reason".
class input_error : public error {
public:
    input_error(std::string file, std::size_t line, std::string column, const std::string& reason)
        : input_error(std::move(file), line, 0, std::move(column), reason) {}
    /// With the character position too (`char_column`, 1-based; 0 = none): "file:line:col: ...".
    input_error(std::string file, std::size_t line, std::size_t char_column, std::string column,
                const std::string& reason)
        : error(format(file, line, char_column, column, reason)),
          file_(std::move(file)),
          line_(line),
          char_column_(char_column),
          column_(std::move(column)) {}

    [[nodiscard]] const std::string& file() const noexcept { return file_; }
    [[nodiscard]] std::size_t line() const noexcept { return line_; }
    [[nodiscard]] const std::string& column() const noexcept { return column_; }
    /// The 1-based character column within the line (0 when not known).
    [[nodiscard]] std::size_t char_column() const noexcept { return char_column_; }

private:
    static std::string format(const std::string& file, std::size_t line, std::size_t char_column,
                              const std::string& column, const std::string& reason) {
        // Built with append(): g++ 12 reports a false -Wrestrict on `"literal" + std::string`.
        std::string msg;
        msg.reserve(file.size() + column.size() + reason.size() + 32);
        msg.append(file);
        if (line > 0) msg.append(":").append(std::to_string(line));
        if (line > 0 && char_column > 0) msg.append(":").append(std::to_string(char_column));
        msg.append(": ");
        if (!column.empty()) msg.append("column '").append(column).append("': ");
        msg.append(reason);
        return msg;
    }

    std::string file_;
    std::size_t line_;
    std::size_t char_column_;
    std::string column_;
};

}  // namespace pipeplan
