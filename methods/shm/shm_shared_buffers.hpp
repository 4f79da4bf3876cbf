// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared buffers (shm_region.hpp): what BMI_memalloc hands out, offered to each peer on the
// connection's socket, and withdrawn before its memory is reused.
//
// Its own object because the pool, the offers and the withdrawals are one promise to the
// peers (a mapping they hold is never of memory we reuse), kept apart from the rings.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>

#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_out_of_descriptors.hpp"
#include "methods/shm/shm_region.hpp"
#include "methods/shm/shm_visits.hpp"

namespace bmi::method::shm {

using Connections = std::unordered_map<std::uint64_t, std::unique_ptr<Connection>>;

class ShmSharedBuffers {
public:
    // connections: the method's, to withdraw a freed buffer from every peer it was offered to.
    ShmSharedBuffers(const Options& options, const Connections& connections, ShmVisits& visits,
                     OutOfDescriptors& descriptors)
        : enabled_(options.shared_buffers),
          eager_limit_(options.eager_limit),
          regions_(options.pool),
          connections_(connections),
          visits_(visits),
          descriptors_(descriptors) {}

    // BMI_memalloc: shared memory, or nullptr for malloc to serve.
    void* allocate(bmi_size_t size);
    // BMI_memfree: false if buffer is not ours. A peer we cannot tell loses its connection.
    bool free(void* buffer);
    // Hands the peer the shared buffers holding segments that it lacks; true if all of
    // segments lies in buffers the peer has.
    bool offer(Connection& conn, std::span<const Segment> segments);
    // Reads the offers and withdrawals the peer sent before an announcement's addresses are
    // looked up; a broken stream is left for the poll pass to close.
    void take_offers(Connection& conn);
    // Region offers and withdrawals the peer sent: 0 once none is left, 1 at the end of the
    // stream (the peer is gone), or -BMI_E* for a broken stream.
    int read_socket(Connection& conn);
    // Keeps the buffer of a receive whose sender outlived it out of the pool.
    void retire(const Operation& op);
    // conn is closing: no region counts as offered to it any more.
    void forget_connection(std::uint64_t id) { regions_.forget_connection(id); }

private:
    const bool enabled_;  // BMI_SHM_SHARED_BUFFERS
    const bmi_size_t eager_limit_;
    OwnRegions regions_;
    const Connections& connections_;
    ShmVisits& visits_;
    OutOfDescriptors& descriptors_;
};

}  // namespace bmi::method::shm
