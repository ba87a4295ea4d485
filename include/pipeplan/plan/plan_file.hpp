// pipeplan/plan/plan_file.hpp — a plan file of either format, told apart by its first bytes:
// the binary format (plan/serialize.hpp) starts with its 8-byte magic "PPLAN\x1A\n\0", anything
// else is read as the JSON format (plan/json.hpp), whose reader names the file and line of a
// syntax error.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::plan {

enum class plan_format : std::uint8_t { binary, json };

/// The format of plan bytes: binary when they start with the binary magic, else JSON.
[[nodiscard]] inline plan_format sniff_plan_format(std::string_view bytes) noexcept {
    return bytes.substr(0, binary_magic.size()) == binary_magic ? plan_format::binary : plan_format::json;
}

/// A whole plan from bytes of either format (`file` names them in errors).
[[nodiscard]] inline execution_plan execution_plan_from_bytes(std::string_view bytes, const std::string& file = "<memory>") {
    return sniff_plan_format(bytes) == plan_format::binary ? execution_plan_from_binary(bytes, file)
                                                           : execution_plan_from_json(bytes, file);
}

/// One rank's plan from bytes of either format.
[[nodiscard]] inline rank_plan rank_plan_from_bytes(std::string_view bytes, const std::string& file = "<memory>") {
    return sniff_plan_format(bytes) == plan_format::binary ? rank_plan_from_binary(bytes, file) : rank_plan_from_json(bytes, file);
}

/// The plan in file `path`, of either format.
[[nodiscard]] inline execution_plan read_plan_file(const std::filesystem::path& path) {
    return execution_plan_from_bytes(read_file_bytes(path), path.string());
}

}  // namespace pipeplan::plan
