// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared buffers (shm_shared_buffers.hpp): BMI_memalloc, offers and withdrawals on the socket.
#include "methods/shm/shm_shared_buffers.hpp"

#include <poll.h>

#include <cerrno>

#include "methods/shm/shm_listener.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// A withdrawal must reach the peer before the memory can be reused (shm_region.hpp); the
// socket holds thousands of these messages, so waiting is for a peer that stopped reading.
constexpr int withdraw_wait_ms = 1000;

bool send_withdrawal(int fd, const RegionMessage& message) {
    for (int waited = 0;; waited += 10) {
        long n = send_with_fds(fd, &message, sizeof message, nullptr, 0);
        if (n == static_cast<long>(sizeof message)) return true;
        if ((n != -EAGAIN && n != -EINTR) || waited >= withdraw_wait_ms) return false;
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 10);
    }
}
}  // namespace

void* ShmSharedBuffers::allocate(bmi_size_t size) {
    // A buffer no larger than an inline message never takes a split copy, and each shared
    // buffer costs a descriptor and whole pages: PVFS allocates its small request buffers
    // with BMI_memalloc too. Those come from malloc, as does everything when memfds run out.
    if (!enabled_ || size <= eager_limit_) return nullptr;
    return regions_.allocate(static_cast<std::size_t>(size));
}

bool ShmSharedBuffers::free(void* buffer) {
    OwnRegions::Region* region = regions_.at(buffer);
    if (region == nullptr) return false;
    // A pooled region stays offered: the peers' mappings of it serve its next owner.
    if (regions_.recycle(*region)) return true;
    RegionMessage withdrawal{region_withdraw, 0, region->id,
                             reinterpret_cast<std::uintptr_t>(region->base), region->size};
    for (std::uint64_t id : region->offered) {
        auto it = connections_.find(id);
        Connection* conn = it == connections_.end() ? nullptr : it->second.get();
        if (conn == nullptr || conn->socket_error != 0) continue;
        if (send_withdrawal(conn->fd, withdrawal)) {
            conn->own_socket_sent->fetch_add(1, std::memory_order_release);
        } else {
            // The peer keeps a mapping it may use for memory we reuse: the connection must go
            // (poll_pass closes it), and with it the peer's table.
            BMI_LOG(error, "shm: could not withdraw a freed buffer from pid %d; closing",
                    static_cast<int>(conn->peer_pid));
            conn->socket_error = -BMI_ECONNRESET;
            visits_.note_work(*conn);
        }
    }
    regions_.release(*region);
    return true;
}

bool ShmSharedBuffers::offer(Connection& conn, std::span<const Segment> segments) {
    if (conn.state != ConnState::open || conn.socket_error != 0) return false;
    bool any = false;
    for (const Segment& s : segments) {
        if (s.size <= 0) continue;
        OwnRegions::Region* region = regions_.containing(s.data, static_cast<std::size_t>(s.size));
        if (region == nullptr) return false;
        any = true;
        if (region->offered.contains(conn.id)) continue;
        RegionMessage offer{region_offer, 0, region->id,
                            reinterpret_cast<std::uintptr_t>(region->base), region->size};
        long n = send_with_fds(conn.fd, &offer, sizeof offer, &region->fd, 1);
        if (n == static_cast<long>(sizeof offer)) {
            // Counted before the RTS or HELP that needs it is published in the ring.
            conn.own_socket_sent->fetch_add(1, std::memory_order_release);
            region->offered.insert(conn.id);
            continue;
        }
        // A full socket: this message goes through the kernel instead. Part of a message on
        // the stream: its framing is lost, and so is the connection.
        if (n > 0) conn.socket_error = -BMI_ECONNRESET;
        return false;
    }
    return any;
}

void ShmSharedBuffers::take_offers(Connection& conn) {
    // Before the hello reply is in, the socket holds the reply, not offers (and the peer
    // offers nothing before it has sent the reply).
    if (conn.state != ConnState::open || conn.socket_error != 0) return;
    // A recvmsg that finds nothing is a system call for nothing (doc/perf/code-figures.md), and
    // this runs twice per large message: read only when the peer has sent more than we read.
    if (conn.peer_socket_sent->load(std::memory_order_acquire) == conn.socket_read) return;
    if (int rc = read_socket(conn); rc < 0) conn.socket_error = rc;
}

int ShmSharedBuffers::read_socket(Connection& conn) {
    for (;;) {
        RegionMessage message{};
        int fd = -1;
        int count = 0;
        long n = receive_with_fds(conn.fd, &message, sizeof message, &fd, 1, count);
        if (n == -EAGAIN || n == -EWOULDBLOCK) return 0;
        if (n == -EINTR) continue;
        if (n == 0) return 1;
        if (n == -EMFILE) {
            // An offer whose memfd did not fit our table: refused like one past its budget,
            // so that buffer's messages take the kernel's paths.
            ++conn.socket_read;
            descriptors_.warn(("a shared buffer of pid " + std::to_string(conn.peer_pid)).c_str());
            continue;
        }
        bool offer = n == static_cast<long>(sizeof message) && message.magic == region_offer;
        bool withdrawal = n == static_cast<long>(sizeof message) &&
                          message.magic == region_withdraw && count == 0;
        if (offer && count == 1) {
            ++conn.socket_read;
            int rc = conn.peer_regions.add(message, fd);
            if (rc == -BMI_ENOMEM)
                BMI_LOG(error,
                        "shm: pid %d offered a shared buffer of %llu bytes past its budget "
                        "(%zu regions, %zu bytes mapped; BMI_SHM_OFFER_BYTES, "
                        "BMI_SHM_OFFER_COUNT): refused",
                        static_cast<int>(conn.peer_pid),
                        static_cast<unsigned long long>(message.size), conn.peer_regions.size(),
                        conn.peer_regions.mapped_bytes());
            BMI_LOG(shm, "shm: shared buffer %llu of pid %d (%llu bytes) %s",
                    static_cast<unsigned long long>(message.id), static_cast<int>(conn.peer_pid),
                    static_cast<unsigned long long>(message.size),
                    rc == 0 ? "mapped: its large messages are copied with memcpy"
                            : "refused: its large messages go through the kernel");
            continue;
        }
        if (count == 1) close(fd);
        if (withdrawal) {
            ++conn.socket_read;
            conn.peer_regions.remove(message.id);
            continue;
        }
        return n < 0 ? -BMI_ECONNRESET : -BMI_EPROTO;
    }
}

void ShmSharedBuffers::retire(const Operation& op) {
    // The late chunks may still land in it: once freed, it must not become another buffer.
    for (int i = 0; i < op.segment_count; ++i) {
        const Segment& segment = op.segments[i];
        OwnRegions::Region* region =
            regions_.containing(segment.data, static_cast<std::size_t>(segment.size));
        if (region != nullptr) region->retired = true;
    }
}

}  // namespace bmi::method::shm
