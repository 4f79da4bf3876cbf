// SPDX-License-Identifier: LGPL-2.1-or-later
// TcpListeners: listening where the configuration and the allocation say (doc/planes.md).
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "methods/tcp/tcp_listeners.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/planes/qos.hpp"

namespace bmi::method::tcp {

namespace {
std::string node_name() {
    char host[256] = {};
    return gethostname(host, sizeof host - 1) == 0 ? std::string(host) : "localhost";
}
}  // namespace

TcpListeners::~TcpListeners() {
    for (const Listener& l : listeners_) close(l.fd);
}

int TcpListeners::start(const Config& config, int epoll_fd) {
    epoll_fd_ = epoll_fd;
    planes_ = config.planes;
    if (config.allocated && planes_.empty() && !config.listen_address.empty()) {
        BMI_WARN("tcp: listen address %s given, but the allocation in force has no tcp plane",
                 config.listen_address.c_str());
        return -BMI_EINVAL;
    }
    for (std::size_t i = 0; i < planes_.size(); ++i) {
        const auto& b = planes_[i];
        SocketPolicy p;
        if (b.subnet.prefix > 0 && resolve_literal(b.local_host, 0, p.source) < 0) p.source = {};
        if (b.dscp) {
            p.tos = support::planes::tos_byte(*b.dscp);
            p.priority = support::planes::socket_priority(*b.dscp);
        }
        p.pacing = static_cast<std::uint64_t>(b.bandwidth_mbps * 1e6 / 8);
        policies_.push_back(p);
    }
    if (!planes_.empty()) return listen_on_planes(config);
    if (config.listen_address.empty()) return 0;

    auto parsed = parse_listen_address(without_trailing_space(config.listen_address),
                                       config.dialect == ApiDialect::standalone);
    if (!parsed) return -BMI_EINVAL;
    // Without BIND_SPECIFIC a server answers on every interface and never resolves the host (as
    // OrangeFS, which is given "tcp://NULL:3334"), but keeps announcing the name it was given,
    // which is what clients should look up.
    SocketAddress bind_to = every_address_for(parsed->host, parsed->port);
    if ((config.flags & BMI_TCP_BIND_SPECIFIC) != 0) {
        if (int rc = resolve(parsed->host, parsed->port, bind_to); rc < 0) return rc;
    }
    int rc = open_socket(bind_to, 0, parsed->host);
    if (rc < 0 && (config.flags & BMI_TCP_BIND_SPECIFIC) == 0 && bind_to.family() == AF_INET6) {
        // A kernel without IPv6: every IPv4 address is what remains.
        BMI_LOG(tcp, "tcp: no IPv6 wildcard (%d); listening on IPv4 only", rc);
        rc = open_socket(every_address_for("0.0.0.0", parsed->port), 0, parsed->host);
    }
    if (rc < 0) {
        BMI_LOG(tcp, "tcp: cannot listen on %s: %d", config.listen_address.c_str(), rc);
        return rc;
    }
    listen_address_ = listeners_.front().address;
    return 0;
}

int TcpListeners::listen_on_planes(const Config& config) {
    const bool server = (config.flags & BMI_INIT_SERVER) != 0;
    if (!config.listen_address.empty()) {
        // An OrangeFS-style server names its address in its configuration; with an allocation
        // in force that address must agree with it, or the admin's two sources disagree.
        auto parsed = parse_tcp_address(without_trailing_space(config.listen_address));
        if (!parsed) return -BMI_EINVAL;
        SocketAddress literal;
        const bool on_plane = resolve_literal(parsed->host, parsed->port, literal) != 0 ||
                              plane_for(literal).has_value();  // a name, or on a plane
        const bool port_allocated =
            parsed->port == 0 || std::any_of(planes_.begin(), planes_.end(), [&](const auto& b) {
                return std::find(b.ports.begin(), b.ports.end(), parsed->port) != b.ports.end();
            });
        if (!on_plane || !port_allocated) {
            BMI_WARN("tcp: listen address %s disagrees with the allocation in force: %s",
                     config.listen_address.c_str(),
                     !on_plane ? "its host is on no allocated plane"
                               : "its port is not one this process was allocated");
            return -BMI_EINVAL;
        }
    } else if (!server) {
        return 0;  // a client reaches out from its planes and listens nowhere
    }
    for (std::size_t i = 0; i < planes_.size(); ++i) {
        const auto& b = planes_[i];
        // A /0 plane binds every address; peers are told the node's name instead.
        const std::string announced = b.subnet.prefix == 0 ? node_name() : b.local_host;
        for (std::uint16_t port : b.ports) {
            SocketAddress at;
            int rc = resolve_literal(b.local_host, port, at);
            if (rc == 0) rc = open_socket(at, i, announced);
            if (rc < 0) {
                BMI_WARN("tcp: allocation %s: cannot listen on %s port %u: %s",
                         b.allocation_id.c_str(), b.local_host.c_str(), unsigned{port},
                         support::error_name(rc));
                return rc;
            }
            if (plane_addresses_.size() <= i) plane_addresses_.resize(i + 1);
            if (plane_addresses_[i].empty()) plane_addresses_[i] = listeners_.back().address;
            listen_address_ += (listen_address_.empty() ? "" : ",") + listeners_.back().address;
        }
        BMI_LOG(tcp, "tcp: plane %s", support::planes::describe(b).c_str());
    }
    return 0;
}

int TcpListeners::open_socket(const SocketAddress& at, std::size_t plane,
                              const std::string& announced_host) {
    int fd = -1;
    if (int rc = open_listener(at, fd); rc < 0) return rc;
    // Accepted sockets inherit the marks; a refusal here would be one on every connection.
    if (int rc = apply_policy(fd, policy_for(plane)); rc < 0) {
        close(fd);
        return rc;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = base + listeners_.size();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
        const int rc = support::bmi_error_from_errno(errno);
        close(fd);
        return rc;
    }
    const std::uint16_t port = port_of(local_address(fd));
    listeners_.push_back({fd, plane, "tcp://" + support::format_host_port(announced_host, port)});
    BMI_LOG(tcp, "tcp: listening on %s", listeners_.back().address.c_str());
    return 0;
}

std::size_t TcpListeners::plane_index(const SocketAddress& address) const {
    if (address.empty()) return planes_.size();
    const auto host = support::planes::host_cidr(address.get());
    for (std::size_t i = 0; i < planes_.size(); ++i)
        if (planes_[i].subnet.prefix == 0 ? planes_[i].subnet.family == host.family
                                          : planes_[i].subnet.contains(host))
            return i;
    return planes_.size();
}

std::optional<std::size_t> TcpListeners::plane_for(const SocketAddress& address) const {
    if (planes_.empty()) return 0;
    const std::size_t plane = plane_index(address);
    if (plane == planes_.size()) return std::nullopt;
    return plane;
}

void TcpListeners::set_interest(bool on) {
    if (listeners_.empty() || watched_ == on) return;
    bool all = true;
    for (std::size_t i = 0; i < listeners_.size(); ++i) {
        epoll_event ev{};
        ev.events = on ? std::uint32_t{EPOLLIN} : 0u;
        ev.data.u64 = base + i;
        all = epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listeners_[i].fd, &ev) == 0 && all;
    }
    if (all) watched_ = on;
}

const SocketPolicy& TcpListeners::policy_for(std::size_t plane) const {
    static const SocketPolicy none;
    return plane < policies_.size() ? policies_[plane] : none;
}

}  // namespace bmi::method::tcp
