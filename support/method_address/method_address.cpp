// SPDX-License-Identifier: LGPL-2.1-or-later
// Address string parsing; see the header for the accepted forms.
#include "method_address.hpp"

#include <charconv>

namespace bmi::support {

namespace {
bool is_scheme_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

bool valid_host(std::string_view host) {
    if (host.empty() || host.size() > 255) return false;
    for (char c : host)
        if (c <= ' ' || c == '/' || c == '[' || c == ']' || c == ',' || c == 127) return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}
}  // namespace

std::optional<SchemeAndRest> split_scheme(std::string_view address) {
    auto sep = address.find("://");
    if (sep == std::string_view::npos || sep == 0) return std::nullopt;
    std::string_view scheme = address.substr(0, sep);
    std::string_view variant;
    if (auto plus = scheme.find('+'); plus != std::string_view::npos) {
        variant = scheme.substr(plus + 1);
        scheme = scheme.substr(0, plus);
        if (scheme.empty() || variant.empty()) return std::nullopt;
    }
    for (std::string_view word : {scheme, variant})
        for (char c : word)
            if (!is_scheme_char(c)) return std::nullopt;
    return SchemeAndRest{scheme, address.substr(sep + 3), variant};
}

std::optional<HostPort> parse_host_port(std::string_view text) {
    HostPort out;
    std::string_view host;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return std::nullopt;
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
        out.bracketed = true;
        if (host.find(':') == std::string_view::npos) return std::nullopt;
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos) return std::nullopt;
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        // An unbracketed IPv6 literal is ambiguous ("::1:80"): refuse it.
        if (host.find(':') != std::string_view::npos) return std::nullopt;
    }
    if (!valid_host(host) || port.empty() || port.size() > 5) return std::nullopt;
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc{} || end != port.data() + port.size() || value > 65535) return std::nullopt;
    out.host = std::string(host);
    out.port = static_cast<std::uint16_t>(value);
    return out;
}

bool names_port(std::string_view text) {
    return !text.empty() && text.front() == '[' ? text.find("]:") != std::string_view::npos
                                                : text.find(':') != std::string_view::npos;
}

std::string format_host_port(std::string_view host, std::uint16_t port) {
    std::string out;
    if (host.find(':') != std::string_view::npos) {
        out += '[';
        out += host;
        out += ']';
    } else {
        out += host;
    }
    out += ':';
    out += std::to_string(port);
    return out;
}

std::vector<std::string_view> split_address_list(std::string_view list) {
    std::vector<std::string_view> out;
    while (!list.empty()) {
        auto comma = list.find(',');
        std::string_view item = trim(list.substr(0, comma));
        if (!item.empty()) out.push_back(item);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace bmi::support
