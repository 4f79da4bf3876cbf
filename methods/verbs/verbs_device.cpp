// SPDX-License-Identifier: LGPL-2.1-or-later
// Opening the local RDMA plane: device and port choice, GID choice, CQ, SRQ and buffer pools.
#include "methods/verbs/verbs_device.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "methods/verbs/verbs_settings.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/optional_library/ibverbs.hpp"

namespace bmi::method::verbs {

namespace {
// An IPv4-mapped GID (::ffff:a.b.c.d) is the RoCEv2 GID of an IPv4 address: routable, and
// what rdma_cm would pick. Anything else (fe80:: link-local, IB GIDs) is the fallback.
bool ipv4_mapped(const ibv_gid& gid) {
    static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(gid.raw, prefix, sizeof prefix) == 0;
}
}  // namespace

int load_choice(const support::Settings& settings, DeviceChoice& out) {
    auto whole = [&](SettingId id) { return static_cast<int>(settings.number(id)); };
    out.device = settings.text(SettingId::device);
    out.port = whole(SettingId::port);
    out.gid_index = whole(SettingId::gid_index);
    out.credits = whole(SettingId::credits);
    out.srq_cap = whole(SettingId::srq_cap);
    out.max_connections = whole(SettingId::max_connections);
    out.send_buffers = whole(SettingId::send_buffers);
    out.pending_per_source = whole(SettingId::pending_per_source);
    // The table bounds each value alone; this rule ties two of them.
    if (out.srq_cap < out.credits) {
        BMI_WARN("verbs: BMI_VERBS_SRQ_CAP (verbs_srq_cap) = %d is not valid: expected at "
                 "least BMI_VERBS_CREDITS (verbs_credits) = %d",
                 out.srq_cap, out.credits);
        return -BMI_EINVAL;
    }
    return 0;
}

bool any_device(std::string* reason) {
    std::string why;
    if (support::load_ibverbs(&why) == nullptr) {
        if (reason) *reason = "no libibverbs (" + why + ")";
        return false;
    }
    int count = 0;
    ibv_device** list = support::ibv().get_device_list(&count);
    if (list == nullptr) {
        if (reason)
            *reason = std::string("no RDMA device (ibv_get_device_list: ") + std::strerror(errno) +
                      ")";
        return false;
    }
    support::ibv().free_device_list(list);
    if (count == 0 && reason) *reason = "no RDMA device (ibv_get_device_list found none)";
    return count > 0;
}

Device::~Device() {
    if (srq) support::ibv().destroy_srq(srq);
    for (BufferPool* pool : {&recv_pool, &send_pool})
        for (auto& c : pool->chunks) {
            if (c.mr) support::ibv().dereg_mr(c.mr);
            if (c.memory) munmap(c.memory, std::size_t{BufferPool::chunk} * buffer_size);
        }
    if (cq) support::ibv().destroy_cq(cq);
    if (channel) support::ibv().destroy_comp_channel(channel);
    if (pd) support::ibv().dealloc_pd(pd);
    if (context) support::ibv().close_device(context);
}

int Device::open(const DeviceChoice& c) {
    choice = c;
    int count = 0;
    ibv_device** list = support::ibv().get_device_list(&count);
    if (list == nullptr || count == 0) {
        if (list) support::ibv().free_device_list(list);
        return -BMI_ENODEV;
    }
    int rc = -BMI_ENODEV;
    for (int i = 0; i < count && rc < 0; ++i) {
        if (!choice.device.empty() && choice.device != support::ibv().get_device_name(list[i]))
            continue;
        rc = open_port(list[i]);
    }
    support::ibv().free_device_list(list);
    if (rc < 0) return rc;

    channel = support::ibv().create_comp_channel(context);
    if (channel == nullptr) return -BMI_ENODEV;
    // Nonblocking, so progress() can drain events without ever sleeping in the library.
    fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
    fcntl(context->async_fd, F_SETFL, fcntl(context->async_fd, F_GETFL) | O_NONBLOCK);
    // Every work request that can complete at once: the SRQ, plus the send queue of every
    // connection. Sized once: resizing a CQ under traffic is where providers differ most.
    ibv_device_attr da{};
    support::ibv().query_device(context, &da);
    const int fixed = choice.srq_cap + choice.send_buffers;
    max_connections = std::min(choice.max_connections, (da.max_cqe - fixed) / sq_depth);
    if (max_connections < 1) return -BMI_ENOMEM;
    cq_size = fixed + max_connections * sq_depth;
    cq = support::ibv().create_cq(context, cq_size, nullptr, channel, 0);
    if (cq == nullptr) return -BMI_ENOMEM;
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = static_cast<std::uint32_t>(choice.srq_cap);
    sa.attr.max_sge = 1;
    srq = support::ibv().create_srq(pd, &sa);
    if (srq == nullptr) return -BMI_ENOMEM;
    recv_pool.limit = static_cast<std::uint32_t>(choice.srq_cap);
    send_pool.limit = static_cast<std::uint32_t>(choice.send_buffers);
    if (!grow_pool(send_pool, send_pool.limit, true)) return -BMI_ENOMEM;
    grow_srq(static_cast<std::uint32_t>(choice.srq_base));
    if (ibv_req_notify_cq(cq, 0) != 0) return -BMI_EIO;
    BMI_LOG(verbs, "verbs: %s port %u gid index %d mtu %d %s", name.c_str(), port, gid_index,
            128 << mtu, ethernet ? "RoCE" : "IB");
    return 0;
}

int Device::open_port(ibv_device* dev) {
    ibv_context* ctx = support::ibv().open_device(dev);
    if (ctx == nullptr) return -BMI_ENODEV;
    ibv_device_attr da{};
    if (support::ibv().query_device(ctx, &da) != 0) {
        support::ibv().close_device(ctx);
        return -BMI_ENODEV;
    }
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
        if (choice.port != 0 && choice.port != p) continue;
        ibv_port_attr pa{};
        if (support::query_port(ctx, static_cast<std::uint8_t>(p), &pa) != 0) continue;
        if (pa.state != IBV_PORT_ACTIVE) continue;
        context = ctx;
        name = support::ibv().get_device_name(dev);
        port = static_cast<std::uint8_t>(p);
        lid = pa.lid;
        mtu = pa.active_mtu;  // the path MTU may not exceed what the port runs at
        ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        max_msg = pa.max_msg_sz;
        max_send_sge = std::min(da.max_sge, 16);
        max_read_sge = std::min(da.max_sge_rd > 0 ? da.max_sge_rd : da.max_sge, 16);
        max_rd_atomic = std::max(1, std::min(da.max_qp_init_rd_atom, 16));
        max_dest_rd_atomic = std::max(1, std::min(da.max_qp_rd_atom, 16));
        pd = support::ibv().alloc_pd(ctx);
        if (pd == nullptr) return -BMI_ENOMEM;
        choice.srq_cap = std::min(choice.srq_cap, da.max_srq_wr > 0 ? da.max_srq_wr : 1);
        choose_gid_index(pa.gid_tbl_len);
        return 0;
    }
    support::ibv().close_device(ctx);
    return -BMI_ENODEV;
}

// An explicit index wins. Otherwise RoCE takes the first IPv4-mapped GID (RoCEv2 over IPv4),
// else index 0; InfiniBand uses index 0 (its GID is only needed across subnets).
void Device::choose_gid_index(int table_length) {
    gid_index = 0;
    if (choice.gid_index >= 0) {
        gid_index = choice.gid_index;
    } else if (ethernet) {
        for (int i = 0; i < std::min(table_length, 64); ++i) {
            ibv_gid g{};
            if (support::ibv().query_gid(context, port, i, &g) == 0 && ipv4_mapped(g)) {
                gid_index = i;
                break;
            }
        }
    }
    if (support::ibv().query_gid(context, port, gid_index, &gid) != 0)
        std::memset(&gid, 0, sizeof gid);
}

bool Device::grow_pool(BufferPool& pool, std::uint32_t count, bool free_list) {
    count = std::min(count, pool.limit);
    while (pool.count < count) {
        const std::size_t bytes = std::size_t{BufferPool::chunk} * buffer_size;
        void* memory =
            mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED) return false;
        ibv_mr* mr = support::ibv().reg_mr(pd, memory, bytes, IBV_ACCESS_LOCAL_WRITE);
        if (mr == nullptr) {
            munmap(memory, bytes);
            return false;
        }
        pool.chunks.push_back({static_cast<std::uint8_t*>(memory), mr});
        const std::uint32_t first = pool.count;
        pool.count += BufferPool::chunk;
        if (free_list)
            for (std::uint32_t k = pool.count; k-- > first;) pool.free.push_back(k);
    }
    return true;
}

void Device::grow_srq(std::uint32_t wanted) {
    wanted = std::min(wanted, recv_pool.limit);
    if (!grow_pool(recv_pool, wanted, false)) wanted = std::min(wanted, recv_pool.count);
    while (srq_posted < wanted && post_recv(srq_posted)) ++srq_posted;
}

bool Device::post_recv(std::uint32_t index) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(recv_pool.at(index));
    sge.length = buffer_size;
    sge.lkey = recv_pool.lkey(index);
    ibv_recv_wr wr{};
    wr.wr_id = index;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(srq, &wr, &bad) == 0;
}

}  // namespace bmi::method::verbs
