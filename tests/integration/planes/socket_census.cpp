// SPDX-License-Identifier: LGPL-2.1-or-later
#include "tests/integration/planes/socket_census.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace bmi::test {

namespace {
// Inodes of the sockets among this process's descriptors, with the descriptor.
std::vector<std::pair<unsigned long, int>> socket_inodes() {
    std::vector<std::pair<unsigned long, int>> out;
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return out;
    while (dirent* e = readdir(dir)) {
        char link[64] = {};
        const std::string path = std::string("/proc/self/fd/") + e->d_name;
        if (readlink(path.c_str(), link, sizeof link - 1) <= 0) continue;
        unsigned long inode = 0;
        if (std::sscanf(link, "socket:[%lu]", &inode) == 1)
            out.emplace_back(inode, std::atoi(e->d_name));
    }
    closedir(dir);
    return out;
}

std::uint16_t port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    return 0;
}
}  // namespace

std::vector<std::uint16_t> listening_ports() {
    std::set<unsigned long> mine;
    for (auto [inode, fd] : socket_inodes()) mine.insert(inode);
    std::vector<std::uint16_t> ports;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        std::getline(in, line);  // the heading
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
            unsigned long inode = 0;
            fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
                timeout >> inode;
            if (state != "0A" || !mine.count(inode)) continue;  // 0A: LISTEN
            ports.push_back(static_cast<std::uint16_t>(
                std::strtoul(local.substr(local.find(':') + 1).c_str(), nullptr, 16)));
        }
    }
    std::sort(ports.begin(), ports.end());
    return ports;
}

std::vector<OpenSocket> connected_sockets() {
    std::vector<OpenSocket> out;
    for (auto [inode, fd] : socket_inodes()) {
        sockaddr_storage local{}, remote{};
        socklen_t a = sizeof local, b = sizeof remote;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &a) != 0) continue;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &b) != 0) continue;
        if (local.ss_family != AF_INET && local.ss_family != AF_INET6) continue;
        out.push_back({fd, port_of(local), port_of(remote)});
    }
    return out;
}

std::vector<std::uint16_t> free_ports(int n) {
    std::vector<std::uint16_t> ports;
    std::vector<int> held;
    while (static_cast<int>(ports.size()) < n) {
        const int fd = socket(AF_INET6, SOCK_STREAM, 0);
        int off = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // both families at once
        sockaddr_in6 any{};
        any.sin6_family = AF_INET6;
        socklen_t len = sizeof any;
        if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr*>(&any), &len) != 0)
            std::abort();
        held.push_back(fd);
        ports.push_back(ntohs(any.sin6_port));
    }
    for (int fd : held) close(fd);
    return ports;
}

std::string port_list(const std::vector<std::uint16_t>& ports) {
    std::string out;
    for (auto p : ports) {
        if (!out.empty()) out += ',';
        out += std::to_string(p);
    }
    return out;
}

}  // namespace bmi::test
