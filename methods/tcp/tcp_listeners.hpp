// SPDX-License-Identifier: LGPL-2.1-or-later
// Where a tcp instance listens, and which allocated plane each address lies on (doc/planes.md):
// a server listens on each plane's addresses and ports and nowhere else, every peer it reaches
// must lie on one of its planes, and every socket on a plane carries the plane's marks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "methods/method.hpp"
#include "methods/tcp/tcp_socket.hpp"

namespace bmi::method::tcp {

class TcpListeners {
public:
    struct Listener {
        int fd = -1;
        std::size_t plane = 0;  // index into the planes; 0 when no allocation is in force
        std::string address;    // "tcp://host:port"
    };
    // Listener i is epoll id base + i (connections count up from 16, wake tags are 2^63 and up).
    static constexpr std::uint64_t base = 1ull << 62;

    TcpListeners() = default;
    ~TcpListeners();
    TcpListeners(const TcpListeners&) = delete;
    TcpListeners& operator=(const TcpListeners&) = delete;

    // Opens what config asks for (on its planes when an allocation is in force) and adds each
    // socket to epoll_fd; 0 or -BMI_E*.
    int start(const Config& config, int epoll_fd);

    bool empty() const { return listeners_.empty(); }
    // The listener an epoll id names, or nullopt if it names none.
    std::optional<std::size_t> index_of(std::uint64_t epoll_id) const {
        if (epoll_id < base || epoll_id - base >= listeners_.size()) return std::nullopt;
        return epoll_id - base;
    }
    const Listener& at(std::size_t i) const { return listeners_.at(i); }
    // Watches the listeners for new connections, or stops (the descriptor table is full).
    void set_interest(bool on);

    // What the instance announces: every listener's address, comma-separated on planes.
    const std::string& address() const { return listen_address_; }
    // The address announced on a connection of `plane`.
    const std::string& own_address(std::size_t plane) const {
        return plane < plane_addresses_.size() ? plane_addresses_[plane] : listen_address_;
    }
    // The plane `address` lies on: 0 without an allocation, nullopt if it lies on none.
    std::optional<std::size_t> plane_for(const SocketAddress& address) const;
    const SocketPolicy& policy_for(std::size_t plane) const;

private:
    int listen_on_planes(const Config& config);
    int open_socket(const SocketAddress& at, std::size_t plane, const std::string& announced_host);
    std::size_t plane_index(const SocketAddress& address) const;  // planes_.size() if none

    int epoll_fd_ = -1;
    std::vector<Listener> listeners_;
    bool watched_ = true;
    std::vector<support::planes::PlaneBinding> planes_;  // the allocated tcp planes, if any
    std::vector<std::string> plane_addresses_;           // per plane, its first listener's address
    std::vector<SocketPolicy> policies_;                 // per plane, what its sockets carry
    std::string listen_address_;
};

}  // namespace bmi::method::tcp
