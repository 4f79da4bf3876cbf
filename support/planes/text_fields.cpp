// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/text_fields.hpp"

#include <charconv>
#include <cmath>

namespace bmi::support::planes {

std::string ParseError::text() const {
    std::string out = source;
    if (line != 0) {
        out += ':';
        out += std::to_string(line);
    }
    out += ": ";
    if (!field.empty()) out += field + ": ";
    return out + message;
}

namespace {
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
    return s;
}
}  // namespace

std::vector<TextLine> meaningful_lines(std::string_view text, bool semicolons) {
    std::vector<TextLine> lines;
    std::size_t number = 1;
    std::size_t start = 0;
    bool in_comment = false;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        const bool end_of_line = i == text.size() || text[i] == '\n';
        const bool ends_entry = end_of_line || (!in_comment && semicolons && text[i] == ';');
        if (!end_of_line && !in_comment && text[i] == '#') in_comment = true;
        if (!ends_entry) continue;
        std::string_view piece = text.substr(start, i - start);
        piece = piece.substr(0, piece.find('#'));
        piece = trim(piece);
        if (!piece.empty()) lines.push_back({number, piece});
        start = i + 1;
        if (end_of_line) {
            ++number;
            in_comment = false;
        }
    }
    return lines;
}

std::vector<std::string_view> split_blanks(std::string_view text) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_blank(text[i])) ++i;
        const std::size_t start = i;
        while (i < text.size() && !is_blank(text[i])) ++i;
        if (i > start) out.push_back(text.substr(start, i - start));
    }
    return out;
}

std::vector<std::string_view> split_on(std::string_view text, char separator) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || text[i] == separator) {
            out.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    return out;
}

// Appended piece by piece: gcc 12 at -O3 warns falsely (-Wrestrict) about the copy in
// "'" + std::string(text), which inserts the quote at the front of the temporary.
std::string quoted(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '\'';
    out += text;
    out += '\'';
    return out;
}

std::optional<Field> parse_field(std::string_view token, std::string& error) {
    const std::size_t eq = token.find('=');
    if (eq == std::string_view::npos) {
        error = quoted(token) + " is not key=value";
        return std::nullopt;
    }
    Field f{token.substr(0, eq), token.substr(eq + 1), false};
    if (f.key.empty()) {
        error = quoted(token) + " has no key";
        return std::nullopt;
    }
    if (!f.value.empty() && f.value.back() == '!') {
        f.required = true;
        f.value.remove_suffix(1);
    }
    if (f.value.empty()) {
        error = "no value";
        return std::nullopt;
    }
    return f;
}

std::optional<std::uint64_t> parse_whole(std::string_view text, std::uint64_t min,
                                         std::uint64_t max) {
    if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || v < min || v > max)
        return std::nullopt;
    return v;
}

std::optional<double> parse_positive(std::string_view text) {
    if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
    double v = 0;
    const auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
    if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v) || v <= 0)
        return std::nullopt;
    return v;
}

std::optional<double> parse_bandwidth_mbps(std::string_view text) {
    const auto v = parse_positive(text);
    if (!v || *v < min_bandwidth_mbps || *v > max_bandwidth_mbps) return std::nullopt;
    return v;
}

bool is_name(std::string_view text) {
    if (text.empty() || text.size() > 255) return false;
    for (char c : text) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok) return false;
    }
    return true;
}

}  // namespace bmi::support::planes
