// SPDX-License-Identifier: LGPL-2.1-or-later
// The event loop: bootstrap sockets and the completion channel behind one epoll fd, the
// completion queue, and what happens when a connection fails.
#include <sys/epoll.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "methods/verbs/verbs_method_impl.hpp"
#include "methods/verbs/verbs_peer_checks.hpp"
#include "support/epoll/wake_fd.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/optional_library/ibverbs.hpp"

namespace bmi::method::verbs {

namespace {
// What a failed work completion means to the application. The raw status stays in the log.
int wc_error(ibv_wc_status status) {
    switch (status) {
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RNR_RETRY_EXC_ERR:
            return -BMI_ETIMEDOUT;  // the peer stopped answering
        case IBV_WC_REM_ACCESS_ERR:
        case IBV_WC_REM_INV_REQ_ERR:
        case IBV_WC_REM_OP_ERR:
        case IBV_WC_BAD_RESP_ERR:
            return -BMI_EPROTO;
        case IBV_WC_WR_FLUSH_ERR:
            return -BMI_ECONNRESET;
        case IBV_WC_LOC_PROT_ERR:
        case IBV_WC_LOC_ACCESS_ERR:
        case IBV_WC_MW_BIND_ERR:
            return -BMI_EFAULT;
        default:
            return -BMI_EIO;
    }
}
}  // namespace

void VerbsMethod::progress() {
    epoll_event events[32];
    const int n = epoll_wait(epoll_fd_, events, 32, 0);
    handle_events({events, static_cast<std::size_t>(n > 0 ? n : 0)});
}

// The control layer slept on our epoll set itself (accept_wake_fd) and hands over what it got.
void VerbsMethod::progress_events(std::span<const epoll_event> ready) {
    ++stats_.handed_wakeups;
    handle_events(ready);
}

bool VerbsMethod::accept_wake_fd(int fd, std::uint64_t tag) {
    // Our own tags (listener, CQ, timer, async events, connections counting up from 16) stay
    // far below 2^63, so the control layer's can never be mistaken for one of ours.
    return support::add_wake_fd(epoll_fd_, fd, tag);
}

// In direct mode a sleeping test call runs no progress pass of its own, so work that no fd
// announces must be found here: messages parked while the unexpected quota was full, which
// BMI_unexpected_free made room for.
bool VerbsMethod::before_sleep() {
    if (work_.with_parked.empty() || !retry_parked()) return false;
    finish_pass();
    return true;
}

// Events may be stale (another thread progressed meanwhile): every handler treats EAGAIN as
// nothing to do.
void VerbsMethod::handle_events(std::span<const epoll_event> ready) {
    bool cq_event = false;
    bool timer_event = false;
    for (const epoll_event& event : ready) {
        const std::uint64_t id = event.data.u64;
        if (id >= support::wake_tag_floor) continue;  // the control layer's fds: never ours to read
        if (id == listener_id) {
            acceptor_.accept_all(listener_.fd, 0);
        } else if (id == cq_id) {
            cq_event = true;
        } else if (id == timer_id) {
            timer_event = true;
        } else if (id == async_id) {
            drain_async_events();
        } else if (auto it = connections_.find(id); it != connections_.end()) {
            on_socket(*it->second, event.events);
        }
    }
    if (cq_event && device_failed_ == 0) {
        // Take every event, acknowledge them in one call, re-arm, and only then poll: a
        // completion that lands after the poll raises a new event, so none is lost.
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        unsigned count = 0;
        while (support::ibv().get_cq_event(device_->channel, &cq, &context) == 0) ++count;
        if (count > 0) support::ibv().ack_cq_events(device_->cq, count);
        ibv_req_notify_cq(device_->cq, 0);
    }
    poll_cq();
    // After the completions: credits and FINs that came while we did not progress count
    // before a deadline on them is judged.
    if (timer_event)
        timers_.expire([this](kit::DeadlineKey key, auto now) {
            if (kit::Acceptor::owns(key))
                acceptor_.on_deadline(key, now);
            else if (key.kind == kit::DeadlineKind::setup)
                on_setup_deadline(key);
            else
                on_peer_deadline(key, now);
        });
    retry_parked();
    finish_pass();
}

void VerbsMethod::finish_pass() {
    // Pumping can post more work, which cannot complete before the next poll: one pass.
    for (std::size_t i = 0; i < work_.to_pump.size(); ++i)
        if (auto it = connections_.find(work_.to_pump[i]); it != connections_.end()) {
            it->second->pump_scheduled = false;
            pump(*it->second);
        }
    work_.to_pump.clear();
    reap();
}

// A handshake that does not finish in time (a peer that accepts TCP but never answers, or
// answers with half a HELLO) fails its connection, so queued sends complete in bounded time.
// The timer goes off only at a deadline, and then looks only at the handshakes due.
void VerbsMethod::watch_setup(const Connection& c) {
    timers_.schedule({c.id, kit::DeadlineKind::setup}, c.setup_deadline);
}

void VerbsMethod::on_setup_deadline(kit::DeadlineKey key) {
    auto it = connections_.find(key.id);
    if (it == connections_.end()) return;
    Connection& c = *it->second;
    if (c.state == Connection::State::ready || c.state == Connection::State::failed) return;
    fail_connection(c, -BMI_ETIMEDOUT);
}

void VerbsMethod::poll_cq() {
    ibv_wc wcs[32];
    for (;;) {
        int n = ibv_poll_cq(device_->cq, 32, wcs);
        if (n <= 0) return;
        for (int i = 0; i < n; ++i) on_completion(wcs[i]);
    }
}

void VerbsMethod::on_completion(const ibv_wc& wc) {
    Connection* c = queue_pairs_.by_number(wc.qp_num);
    const std::uint64_t kind = wc.wr_id >> kind_shift;
    const std::uint64_t low = wc.wr_id & ((std::uint64_t{1} << kind_shift) - 1);
    if (wc.status != IBV_WC_SUCCESS && c != nullptr && c->state != Connection::State::failed)
        BMI_LOG(verbs, "verbs: connection %llu: %s", static_cast<unsigned long long>(c->id),
                support::ibv().wc_status_str(wc.status));
    if ((wc.opcode & IBV_WC_RECV) != 0 && kind == 0) {
        // SRQ buffers are not tied to a QP: an error here is rare (local length error).
        const auto buffer = static_cast<std::uint32_t>(low);
        // The client's first SEND is what makes an accepted connection ready: only a real
        // queue pair connected to ours can deliver it, whatever the socket said.
        if (c != nullptr && wc.status == IBV_WC_SUCCESS &&
            c->state == Connection::State::awaiting_ready)
            became_ready(*c);
        if (c == nullptr || wc.status != IBV_WC_SUCCESS || c->state != Connection::State::ready) {
            device_->post_recv(buffer);
            if (c != nullptr && wc.status != IBV_WC_SUCCESS)
                fail_connection(*c, wc_error(wc.status));
            return;
        }
        // Opened in completion order, which is the queue pair's order: the record counter.
        // Nothing of a message, its header included, counts before it opens.
        std::uint32_t length = wc.byte_len;
        if (c->records) {
            const std::optional<std::uint32_t> plain =
                c->records->open(device_->recv_pool.at(buffer), length);
            if (!plain) {
                BMI_LOG(verbs, "verbs: connection %llu: a record failed authentication",
                        static_cast<unsigned long long>(c->id));
                device_->post_recv(buffer);
                fail_connection(*c, -BMI_EPROTO);
                return;
            }
            length = *plain;
        }
        // Counted on arrival, parked or not: a peer past its credits holds SRQ buffers that
        // every other peer needs. Only CREDIT is free.
        const bool costs = costs_credit(buffer);
        if (costs && !spend_granted_credit(c->granted_credits)) {
            BMI_LOG(error, "verbs: connection %llu sent past the credits it was granted",
                    static_cast<unsigned long long>(c->id));
            device_->post_recv(buffer);
            fail_connection(*c, -BMI_EPROTO);
            return;
        }
        if (!c->parked.empty() && !take_credits(*c, buffer, length)) {
            device_->post_recv(buffer);
            return;
        }
        if (!c->parked.empty() || !on_message(*c, buffer, length)) {
            if (c->parked.empty()) work_.with_parked.push_back(c->id);
            c->parked.emplace_back(buffer, length);
            ++stats_.parked;
            return;
        }
        device_->post_recv(buffer);
        if (costs) ++c->owed_credits;
        if (c->owed_credits * 2 >= device_->choice.credits) schedule(*c);
        return;
    }
    if (c != nullptr) {
        ++c->sq_free;
        schedule(*c);
    }
    if (kind == kind_send) {
        release_send_buffer(static_cast<std::uint32_t>(low));
    } else if (kind == kind_read) {
        auto it = reads_.find(low);
        if (it != reads_.end()) {
            RecvTransfer& t = *it->second;
            --t.outstanding;
            if (wc.status != IBV_WC_SUCCESS && t.error == 0) t.error = wc_error(wc.status);
            const bool dead = t.connection->state == Connection::State::failed;
            if (dead && t.error == 0) t.error = t.connection->error;
            if (t.outstanding == 0 && (t.issued_all || t.error != 0)) read_done(t);
        }
    }
    if (wc.status != IBV_WC_SUCCESS && c != nullptr) fail_connection(*c, wc_error(wc.status));
    if (c != nullptr) maybe_retire(*c);
}

// The connection is unusable: its QP goes to the error state so every posted work request
// flushes, its operations fail with a BMI code, and other connections carry on.
void VerbsMethod::fail_connection(Connection& c, int error) {
    using State = Connection::State;
    if (c.state == State::failed) return;
    const bool was_ready = c.state == State::ready;
    mark_failed(c);
    c.error = error;
    BMI_LOG(verbs, "verbs: connection %llu failed: %s", static_cast<unsigned long long>(c.id),
            support::error_name(error));
    if (c.qp != nullptr) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        support::ibv().modify_qp(c.qp, &a, IBV_QP_STATE);
    }
    if (c.fd >= 0) {
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
        close(c.fd);
        c.fd = -1;
        set_listener_interest(true);  // a descriptor is free again
    }
    while (!c.sends.empty()) {
        Operation& op = c.sends.front();
        c.sends.pop_front();
        ops_.finish(op, error);
    }
    c.controls.clear();
    for (auto it = sends_.begin(); it != sends_.end();) {
        SendTransfer& t = *it->second;
        if (t.connection != &c) {
            ++it;
            continue;
        }
        for (auto& hd : t.handles) reg_->release(hd);
        Operation* op = t.op;
        it = sends_.erase(it);
        if (op != nullptr) ops_.finish(*op, error);
    }
    wake_staging_waiters();
    // Receives reading through this QP finish when their last READ has flushed.
    c.reads.clear();
    std::vector<RecvTransfer*> idle;
    for (auto& [id, t] : reads_)
        if (t->connection == &c) {
            if (t->error == 0) t->error = error;
            if (t->outstanding == 0) idle.push_back(t.get());
        }
    for (RecvTransfer* t : idle) read_done(*t);
    for (auto [buffer, length] : c.parked) device_->post_recv(buffer);
    c.parked.clear();
    if (c.peer) {
        VerbsPeer& peer = *c.peer;
        peer.last_error = error;
        if (peer.connection == &c) {
            peer.connection = nullptr;
            // Receives from a peer that is gone would wait forever; the RTS it sent cannot be
            // read any more. Eager messages already here stay deliverable.
            if (was_ready || c.outbound) ops_.fail_posted_recvs(peer, error);
        }
        peer.arrivals.remove_if([&](const Arrival& a) { return a.rts && a.connection_id == c.id; },
                                [&](const Arrival& a) { arrivals_.uncharge(peer, a); });
        // The application may hold its address; the control layer drops it when nobody does.
        if (peer.addr() != 0 && peer_gone(peer)) sink_.peer_gone(peer);
    }
    maybe_retire(c);
}

// A failed connection is destroyed once nothing of it is left on the completion queue.
void VerbsMethod::maybe_retire(Connection& c) {
    if (c.state != Connection::State::failed || c.sq_free < c.sq_depth) return;
    work_.retired.push_back(c.id);
}

void VerbsMethod::reap() {
    for (std::uint64_t id : std::exchange(work_.retired, {})) {
        auto it = connections_.find(id);
        if (it == connections_.end()) continue;
        Connection& c = *it->second;
        if (c.qp != nullptr) {
            queue_pairs_.remove(c);
            support::ibv().destroy_qp(c.qp);
        }
        if (c.peer && c.peer->connection == &c) c.peer->connection = nullptr;
        acceptor_.release(id);
        connections_.erase(it);
    }
}

}  // namespace bmi::method::verbs
