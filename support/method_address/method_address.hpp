// SPDX-License-Identifier: LGPL-2.1-or-later
// Parsing of BMI address strings: "scheme://rest" and the "host:port" / "[v6]:port" inside it.
// Pure string work, no name resolution; every function rejects rather than guesses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bmi::support {

struct SchemeAndRest {
    std::string_view scheme;   // "tcp"; "ofi" for "ofi+tcp://"
    std::string_view rest;     // "host:port"
    std::string_view variant;  // "tcp" for "ofi+tcp://": what the method reaches through; often ""
};

// "tcp://h:1" -> {"tcp", "h:1"}, "ofi+tcp://h:1" -> {"ofi", "h:1", "tcp"}; nullopt without
// "://", or when the scheme or the variant is empty or not [a-z0-9_]+. The variant is the
// method's to read: the control layer picks the method by the scheme alone.
std::optional<SchemeAndRest> split_scheme(std::string_view address);

struct HostPort {
    std::string host;  // name, IPv4 text, or IPv6 text without brackets
    std::uint16_t port = 0;
    bool bracketed = false;  // was written as [v6]
};

// "host:port", "1.2.3.4:port" or "[::1]:port"; the port is 0..65535, the host non-empty and
// without spaces or '/'. nullopt otherwise.
std::optional<HostPort> parse_host_port(std::string_view text);

// Whether "host:port" text names a port at all ("host:" does, malformed); "[v6]" names none.
// A listen address without one gets a free port in the standalone dialect.
bool names_port(std::string_view text);

// Inverse of parse_host_port: brackets hosts that contain ':'.
std::string format_host_port(std::string_view host, std::uint16_t port);

// Splits a comma separated list ("tcp://a:1,shm://b"), dropping empty items and spaces.
std::vector<std::string_view> split_address_list(std::string_view list);

}  // namespace bmi::support
