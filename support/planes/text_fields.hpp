// SPDX-License-Identifier: LGPL-2.1-or-later
// The lexical layer shared by the inventory, request and allocation text forms: lines with '#'
// comments, whitespace-separated "key=value" fields, and errors that name where they were found.
// Every form is parsed strictly, so a mistake is reported at its place, never defaulted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bmi::support::planes {

// "<source>:<line>: <field>: <message>", e.g. "alloc.txt:3: ports: 70000 is not a port".
struct ParseError {
    std::string source;
    std::size_t line = 0;
    std::string field;
    std::string message;
    std::string text() const;
};

struct TextLine {
    std::size_t number;     // 1-based, counted in the source text
    std::string_view text;  // comment removed, surrounding blanks trimmed, never empty
};

// The lines that say something. With `semicolons`, ';' also ends an entry, so that one
// environment variable can hold several ("id=a ...; id=b ...").
std::vector<TextLine> meaningful_lines(std::string_view text, bool semicolons);

std::vector<std::string_view> split_blanks(std::string_view text);
std::vector<std::string_view> split_on(std::string_view text, char separator);

struct Field {
    std::string_view key;
    std::string_view value;  // without the required mark
    bool required = false;   // the value ended in '!'
};

// "key=value" or "key=value!"; nullopt (and `error`) for a token without '=' or with an empty
// key or value.
std::optional<Field> parse_field(std::string_view token, std::string& error);

// Whole-string numbers: no sign, no blanks, no trailing text, within [min, max].
std::optional<std::uint64_t> parse_whole(std::string_view text, std::uint64_t min,
                                         std::uint64_t max);
// A positive finite decimal ("200", "12.5").
std::optional<double> parse_positive(std::string_view text);

// Bandwidths in Mbit/s run from one byte a second to a petabit a second: the pacing rate in
// bytes a second is then at least 1 (0 would mean unpaced) and fits 64 bits.
inline constexpr double min_bandwidth_mbps = 0.000008;
inline constexpr double max_bandwidth_mbps = 1e9;
inline constexpr const char* bandwidth_range = "0.000008 to 1000000000 Mbit/s";
// A decimal bandwidth in Mbit/s within that range.
std::optional<double> parse_bandwidth_mbps(std::string_view text);

// TEXT in single quotes, as the error messages name a value.
std::string quoted(std::string_view text);

// Names of planes and allocation ids: [A-Za-z0-9_.-]+, at most 255 characters.
bool is_name(std::string_view text);

}  // namespace bmi::support::planes
