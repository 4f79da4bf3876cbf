// SPDX-License-Identifier: LGPL-2.1-or-later
// Address strings a user or a configuration hands libbmi: lists ("tcp://a:1,shm://b"), the
// scheme split, host:port and [v6]:port, tcp's connect and listen forms and shm's names.
// Properties: a parsed host and port format back to text that parses to the same; a list
// item is never empty, has no outer spaces and no comma; tcp's canonical form parses to
// itself; an accepted shm name is one the socket path can hold.
#include "methods/shm/shm_wire.hpp"
#include "methods/tcp/tcp_address.hpp"
#include "support/method_address/method_address.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::support;

namespace {
void check_host_port(std::string_view text) {
    auto parsed = parse_host_port(text);
    if (!parsed) return;
    FUZZ_CHECK(!parsed->host.empty());
    auto again = parse_host_port(format_host_port(parsed->host, parsed->port));
    FUZZ_CHECK(again && again->host == parsed->host && again->port == parsed->port);
}

void check_tcp(std::string_view address) {
    namespace tcp = bmi::method::tcp;
    for (int form = 0; form < 3; ++form) {
        auto parsed = form == 0 ? tcp::parse_tcp_address(address)
                                : tcp::parse_listen_address(address, form == 2);
        if (!parsed) continue;
        auto again = tcp::parse_tcp_address(parsed->canonical);
        FUZZ_CHECK(again && again->canonical == parsed->canonical && again->host == parsed->host &&
                   again->port == parsed->port);
    }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view list(reinterpret_cast<const char*>(data), size);
    for (std::string_view item : split_address_list(list)) {
        FUZZ_CHECK(!item.empty() && item.front() != ' ' && item.back() != ' ');
        FUZZ_CHECK(item.find(',') == std::string_view::npos);
        check_tcp(item);
        auto parts = split_scheme(item);
        if (!parts) continue;
        FUZZ_CHECK(!parts->scheme.empty());
        check_host_port(parts->rest);
        if (parts->scheme == "shm" && bmi::method::shm::valid_name(parts->rest))
            FUZZ_CHECK(parts->rest.size() <= bmi::method::shm::max_name_length &&
                       parts->rest.find('/') == std::string_view::npos);
    }
    check_host_port(list);
    return 0;
}
