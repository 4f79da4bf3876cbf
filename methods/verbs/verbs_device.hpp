// SPDX-License-Identifier: LGPL-2.1-or-later
// The local RDMA plane of one verbs instance: device, port, GID, protection domain, one
// completion queue behind a completion channel, and the shared receive queue with its buffers.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bmi-types.h"
#include "methods/verbs/verbs_wire.hpp"
#include "support/settings/settings.hpp"

namespace bmi::method::verbs {

// Where to find the device, from the environment and the options string.
// load_choice sets every member but srq_base from the verbs rows (verbs_settings.cpp has
// their defaults and ranges, and nothing here repeats them).
struct DeviceChoice {
    std::string device;  // "" = the first device with an active port
    int port = 0;        // 0 = the first active port
    int gid_index = 0;   // -1 = chosen (see choose_gid_index)
    int credits = 0;     // eager messages one peer may have in flight to us
    int srq_base = 64;   // SRQ buffers posted with no peer at all
    int srq_cap = 0;     // SRQ buffers never grow past this however many peers connect
    int send_buffers = 0;
    int max_connections = 0;     // sizes the completion queue, which is never resized
    int pending_per_source = 0;  // handshakes in progress one source address may hold
};
// Takes the verbs_* rows of the instance's settings; -BMI_EINVAL (logged) if srq_cap is
// below credits.
int load_choice(const support::Settings& settings, DeviceChoice& out);

// True if libibverbs sees at least one device (tests skip without one).
bool any_device(std::string* reason);

// Equal registered buffers addressed by index, allocated and registered in chunks as the
// pool grows, so an instance pins only the receive memory its peers can use.
struct BufferPool {
    static constexpr std::uint32_t chunk = 16;  // buffers per registration
    struct Chunk {
        std::uint8_t* memory = nullptr;
        ibv_mr* mr = nullptr;
    };
    std::vector<Chunk> chunks;
    std::uint32_t count = 0;          // buffers allocated so far
    std::uint32_t limit = 0;          // most buffers it may grow to
    std::vector<std::uint32_t> free;  // indexes not in use (send pool only)
    std::uint8_t* at(std::uint32_t i) const {
        return chunks[i / chunk].memory + std::size_t{i % chunk} * buffer_size;
    }
    std::uint32_t lkey(std::uint32_t i) const { return chunks[i / chunk].mr->lkey; }
};

class Device {
public:
    Device() = default;
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    // Opens everything; 0 or -BMI_E* (-BMI_ENODEV without a usable device).
    int open(const DeviceChoice& choice);

    // Grows the SRQ so it holds `wanted` posted buffers (never past the cap).
    void grow_srq(std::uint32_t wanted);
    // Posts receive buffer i to the SRQ again; false if the SRQ refused (treated as fatal).
    bool post_recv(std::uint32_t index);
    // Send-queue depth of every QP; the CQ has room for all of them (see open()).
    static constexpr int sq_depth = 64;

    ibv_context* context = nullptr;
    ibv_pd* pd = nullptr;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* cq = nullptr;
    ibv_srq* srq = nullptr;
    std::uint8_t port = 1;
    int gid_index = 0;
    ibv_gid gid{};
    std::uint16_t lid = 0;
    ibv_mtu mtu = IBV_MTU_1024;
    bool ethernet = false;  // RoCE: every address handle needs a GRH
    int max_send_sge = 1;
    int max_read_sge = 1;
    int max_rd_atomic = 1;
    int max_dest_rd_atomic = 1;
    std::uint32_t max_msg = 1u << 30;
    int cq_size = 0;
    int max_connections = 0;  // what the CQ was sized for
    std::uint32_t srq_posted = 0;
    std::string name;
    BufferPool recv_pool;
    BufferPool send_pool;
    DeviceChoice choice;

private:
    int open_port(ibv_device* dev);
    // Grows pool to at least count buffers (whole chunks); false if memory is refused.
    bool grow_pool(BufferPool& pool, std::uint32_t count, bool free_list);
    void choose_gid_index(int table_length);
};

}  // namespace bmi::method::verbs
