// pipeplan/core/error.hpp — the exception types every tier throws.
//
// All pipeplan exceptions derive from pipeplan::error (itself a std::runtime_error), so a
// trainer can catch one type. Input problems carry the file, line and column that caused them.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace pipeplan {

/// Base of every exception pipeplan throws.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A caller passed a value outside the documented domain (an unknown name, a negative size...).
/// The message lists the valid choices where there is a finite set of them.
class invalid_argument : public error {
public:
    using error::error;
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
        : error(format(file, line, column, reason)),
          file_(std::move(file)),
          line_(line),
          column_(std::move(column)) {}

    [[nodiscard]] const std::string& file() const noexcept { return file_; }
    [[nodiscard]] std::size_t line() const noexcept { return line_; }
    [[nodiscard]] const std::string& column() const noexcept { return column_; }

private:
    static std::string format(const std::string& file, std::size_t line, const std::string& column,
                              const std::string& reason) {
        // Built with append(): g++ 12 reports a false -Wrestrict on `"literal" + std::string`.
        std::string msg;
        msg.reserve(file.size() + column.size() + reason.size() + 32);
        msg.append(file);
        if (line > 0) msg.append(":").append(std::to_string(line));
        msg.append(": ");
        if (!column.empty()) msg.append("column '").append(column).append("': ");
        msg.append(reason);
        return msg;
    }

    std::string file_;
    std::size_t line_;
    std::string column_;
};

}  // namespace pipeplan
