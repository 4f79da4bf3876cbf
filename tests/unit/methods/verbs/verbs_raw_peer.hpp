// SPDX-License-Identifier: LGPL-2.1-or-later
// A hand-written verbs peer for attack tests: its own device context (the method's Device, so
// SRQ and registered buffers come ready), one RC queue pair, the TCP bootstrap done by hand, and
// SENDs carrying whatever header the test writes. It speaks the wire format, not the rules.
#pragma once

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "methods/verbs/verbs_device.hpp"
#include "methods/verbs/verbs_wire.hpp"
#include "raw_socket.hpp"
#include "support/method_address/method_address.hpp"
#include "support/settings/settings.hpp"

namespace bmi::test::verbs {

using method::verbs::Hello;
using method::verbs::MsgHeader;
using method::verbs::MsgType;

// A blocking TCP socket connected to the bootstrap listener of "verbs://host:port", or -1.
inline int bootstrap_socket(const std::string& address) { return connect_to(address); }

// Reads exactly size bytes from a blocking socket within deadline_ms; false on close or timeout.
inline bool read_within(int fd, void* data, std::size_t size, int deadline_ms) {
    auto* bytes = static_cast<std::uint8_t*>(data);
    std::size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    while (got < size) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) return false;
        const ssize_t n = recv(fd, bytes + got, size - got, 0);
        if (n <= 0) return false;
        got += static_cast<std::size_t>(n);
    }
    return true;
}

// True if fd has neither data nor EOF waiting: the other end still holds it open.
inline bool still_open(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 0;
}

class RawPeer {
public:
    RawPeer() {
        method::verbs::DeviceChoice choice;
        // The environment's BMI_VERBS_*, as an instance reads them.
        support::Settings settings(method::all_settings());
        if (settings.load("") != 0 || method::verbs::load_choice(settings, choice) != 0 ||
            device_.open(choice) != 0)
            return;
        ibv_qp_init_attr ia{};
        ia.send_cq = device_.cq;
        ia.recv_cq = device_.cq;
        ia.srq = device_.srq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 64;
        ia.cap.max_send_sge = 1;
        qp_ = ibv_create_qp(device_.pd, &ia);
        if (qp_ == nullptr) return;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = device_.port;
        a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
        ready_ = ibv_modify_qp(qp_, &a,
                               IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                   IBV_QP_ACCESS_FLAGS) == 0;
    }
    ~RawPeer() {
        if (fd_ >= 0) close(fd_);
        if (qp_ != nullptr) ibv_destroy_qp(qp_);
    }
    RawPeer(const RawPeer&) = delete;
    RawPeer& operator=(const RawPeer&) = delete;

    bool usable() const { return ready_; }

    bool dial(const std::string& address) {
        fd_ = bootstrap_socket(address);
        return fd_ >= 0;
    }

    // A HELLO that describes our queue pair truthfully, naming `name` as our listen address.
    Hello own_hello(const std::string& name = "") const {
        Hello h;
        h.qp_num = qp_->qp_num;
        h.psn = psn;
        h.lid = device_.lid;
        h.mtu = static_cast<std::uint8_t>(device_.mtu);
        h.credits = 16;
        h.eager_payload = method::verbs::eager_payload;
        h.unexpected_limit = method::verbs::eager_payload;
        std::memcpy(h.gid, device_.gid.raw, 16);
        std::memcpy(h.name, name.data(), name.size());
        h.name_length = static_cast<std::uint16_t>(name.size());
        return h;
    }

    bool send_bytes(const void* data, std::size_t size) {
        return ::send(fd_, data, size, MSG_NOSIGNAL) == static_cast<ssize_t>(size);
    }

    bool read_hello(Hello& out, int deadline_ms = 20000) {
        return read_within(fd_, &out, sizeof out, deadline_ms) &&
               out.magic == method::verbs::hello_magic;
    }

    // INIT -> RTR -> RTS towards the server's queue pair, then the ready byte.
    bool go_live(const Hello& remote) {
        return connect_qp(remote) && send_bytes(&method::verbs::ready_byte, 1);
    }

    // INIT -> RTR -> RTS towards the server's queue pair, and nothing on the socket.
    bool connect_qp(const Hello& remote) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = std::min(device_.mtu, static_cast<ibv_mtu>(remote.mtu));
        a.dest_qp_num = remote.qp_num;
        a.rq_psn = remote.psn;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.port_num = device_.port;
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
        a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(device_.gid_index);
        a.ah_attr.grh.hop_limit = 64;
        if (ibv_modify_qp(qp_, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) !=
            0)
            return false;
        ibv_qp_attr s{};
        s.qp_state = IBV_QPS_RTS;
        s.timeout = 14;
        s.retry_cnt = 7;
        s.rnr_retry = 7;
        s.sq_psn = psn;
        s.max_rd_atomic = 1;
        if (ibv_modify_qp(qp_, &s,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
            return false;
        return true;
    }

    // The whole handshake with a verbs listener, as an honest client would do it.
    bool handshake(const std::string& address) {
        Hello remote;
        const Hello mine = own_hello();
        return usable() && dial(address) && send_bytes(&mine, sizeof mine) && read_hello(remote) &&
               go_live(remote);
    }

    // One SEND on the queue pair: header h, then `size` bytes of body. Completions are reaped
    // as they come and not waited for: a server that closes on us flushes them.
    bool send_message(const MsgHeader& h, const void* body = nullptr, std::size_t size = 0) {
        reap();
        // In turn through the whole pool: a test sends far fewer messages than it holds.
        const std::uint32_t buffer = next_buffer_++ % (device_.send_pool.count - 1);
        std::uint8_t* out = device_.send_pool.at(buffer);
        std::memcpy(out, &h, sizeof h);
        if (size > 0) std::memcpy(out + sizeof h, body, size);
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(out),
                    static_cast<std::uint32_t>(sizeof h + size), device_.send_pool.lkey(buffer)};
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(qp_, &wr, &bad) == 0;
    }

    // Registers memory of ours the server may READ (an RTS of ours offers it); the caller
    // deregisters it.
    ibv_mr* register_for_read(void* data, std::size_t size) {
        return ibv_reg_mr(device_.pd, data, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    }

    bool closed_by_server(int deadline_ms) { return closed_within(fd_, deadline_ms); }
    int bootstrap_fd() const { return fd_; }

    // The next message the server sends us: its header and body. False after the deadline.
    bool receive(MsgHeader& h, std::vector<std::uint8_t>& body, int deadline_ms = 20000) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
        while (arrived_.empty() && std::chrono::steady_clock::now() < deadline) reap();
        if (arrived_.empty()) return false;
        const auto [buffer, length] = arrived_.front();
        arrived_.pop_front();
        const std::uint8_t* data = device_.recv_pool.at(buffer);
        std::memcpy(&h, data, sizeof h);
        body.assign(data + sizeof h, data + length);
        return true;
    }

    // RDMA READs `length` (at most 16 KiB) bytes at remote address addr with rkey into `out`:
    // the completion's status (IBV_WC_SUCCESS or why the server's device refused), or -1 if
    // none came before the deadline. A refused READ leaves this queue pair in error.
    int read(std::uint64_t addr, std::uint32_t rkey, std::uint32_t length,
             std::vector<std::uint8_t>& out, int deadline_ms = 20000) {
        std::uint8_t* local = device_.send_pool.at(device_.send_pool.count - 1);
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), length,
                    device_.send_pool.lkey(device_.send_pool.count - 1)};
        ibv_send_wr wr{};
        wr.wr_id = read_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_READ;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = addr;
        wr.wr.rdma.rkey = rkey;
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(qp_, &wr, &bad) != 0) return -1;
        read_status_ = -1;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
        while (read_status_ < 0 && std::chrono::steady_clock::now() < deadline) reap();
        if (read_status_ == IBV_WC_SUCCESS) out.assign(local, local + length);
        return read_status_;
    }

    std::uint32_t psn = 0x1234;

private:
    static constexpr std::uint64_t read_id = 1u << 31;  // above every buffer index

    // Takes every completion: messages that arrived are kept for receive(), a READ's status
    // for read(), SEND completions are dropped.
    void reap() {
        ibv_wc wcs[16];
        for (int n; (n = ibv_poll_cq(device_.cq, 16, wcs)) > 0;)
            for (int i = 0; i < n; ++i) {
                if (wcs[i].wr_id == read_id)
                    read_status_ = static_cast<int>(wcs[i].status);
                else if ((wcs[i].opcode & IBV_WC_RECV) != 0 && wcs[i].status == IBV_WC_SUCCESS)
                    arrived_.emplace_back(static_cast<std::uint32_t>(wcs[i].wr_id),
                                          wcs[i].byte_len);
            }
    }

    method::verbs::Device device_;
    ibv_qp* qp_ = nullptr;
    int fd_ = -1;
    bool ready_ = false;
    std::uint32_t next_buffer_ = 0;  // send buffers in turn; the last one is read()'s
    std::deque<std::pair<std::uint32_t, std::uint32_t>> arrived_;  // SRQ buffer, length
    int read_status_ = -1;
};

}  // namespace bmi::test::verbs
