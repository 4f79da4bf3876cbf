// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/method_address/this_node.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace bmi::support {

namespace {

bool is_loopback(const sockaddr* address) {
    if (address->sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
    if (address->sa_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(&a);
    }
    return false;
}

bool same_host_address(const sockaddr* a, const sockaddr* b) {
    if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
    if (a->sa_family == AF_INET)
        return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr,
                           sizeof(in6_addr)) == 0;
    return false;
}

bool assigned_here(const sockaddr* address) {
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return false;
    bool found = false;
    for (const ifaddrs* i = all; i != nullptr && !found; i = i->ifa_next)
        found = same_host_address(i->ifa_addr, address);
    freeifaddrs(all);
    return found;
}

}  // namespace

bool names_this_node(const std::string& host) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* results = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &results) != 0) return false;
    bool here = false;
    for (const addrinfo* r = results; r != nullptr && !here; r = r->ai_next)
        here = is_loopback(r->ai_addr) || assigned_here(r->ai_addr);
    freeaddrinfo(results);
    return here;
}

}  // namespace bmi::support
