// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's libfabric operations: posting them (with a backlog for -FI_EAGAIN), reading
// the completion queue, and the sleep protocol over its wait descriptor.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <span>

#include "methods/ofi/ofi_method_impl.hpp"
#include "methods/segment_pieces.hpp"
#include "support/epoll/wake_fd.hpp"

namespace bmi::method::ofi {

namespace {
constexpr int completions_per_read = 16;
}

Request& OfiMethod::new_request(Request::Role role, Operation* op) {
    auto owned = std::make_unique<Request>();
    Request& request = *owned;
    request.role = role;
    request.op = op;
    request.is_recv = role == Request::Role::buffer || Request::receives_data(role);
    if (Request::is_data(role)) ++in_flight_.data_requests;
    requests_.emplace(&request, std::move(owned));
    return request;
}

void OfiMethod::release(Request& request) {
    if (Request::is_data(request.role)) --in_flight_.data_requests;
    if (request.to_stranger) --in_flight_.resets_out;
    untrack(request);
    Registrations::release(request.own_mr);
    const fi_addr_t addr = request.addr;
    requests_.erase(&request);
    if (!forgotten_.retiring.empty()) retire_if_unused(addr);
}

int OfiMethod::try_post(Request& r) {
    if (r.is_recv && !own_region_free()) return -FI_EAGAIN;
    if (r.role == Request::Role::buffer)
        return static_cast<int>(
            fabric_.post_buffer(r.data, r.length, r.desc, r.ignore, &r.token, &r.context));
    if (r.is_recv && !r.iov.empty())
        return static_cast<int>(fi_trecvv(fabric_.ep(), r.iov.data(), nullptr, r.iov.size(), r.addr,
                                          r.tag, r.ignore, &r.context));
    if (r.is_recv)
        return static_cast<int>(
            fi_trecv(fabric_.ep(), r.data, r.length, r.desc, r.addr, r.tag, r.ignore, &r.context));
    if (closed_in_process(r.addr)) return -FI_ECONNRESET;
    if (const int rc = region_admits(r.addr); rc != 0) return rc;
    if (r.role != Request::Role::data_send)
        return static_cast<int>(
            fabric_.send_small(r.data, r.length, r.desc, r.addr, r.tag, &r.context));
    if (!r.iov.empty())
        return static_cast<int>(fi_tsendv(fabric_.ep(), r.iov.data(), nullptr, r.iov.size(), r.addr,
                                          r.tag, &r.context));
    return static_cast<int>(
        fi_tsend(fabric_.ep(), r.data, r.length, r.desc, r.addr, r.tag, &r.context));
}

void OfiMethod::submit(Request& request) {
    // Registered once: a buffer keeps its registration through every repost.
    if (registrations_.active() && request.desc == nullptr && request.own_mr == nullptr)
        if (int rc = register_memory(request); rc != 0) {
            // A buffer would only fail again at its repost: it goes.
            if (request.role == Request::Role::buffer)
                release(request);
            else
                on_error(request, rc);
            return;
        }
    track(request);
    // Behind its peer's backlog a post would overtake what waits there.
    auto it = backlog_.by_peer.find(request.addr);
    if (it == backlog_.by_peer.end()) {
        const int rc = try_post(request);
        if (rc == 0) return;
        if (rc != -FI_EAGAIN) {
            on_error(request, bmi_error(rc));
            return;
        }
        if (backlog_.by_peer.empty()) backlog_.pause.restart();
        it = backlog_.by_peer.try_emplace(request.addr).first;
    }
    it->second.push_back(&request);
}

bool OfiMethod::backlog_empty(fi_addr_t addr) const { return backlog_.by_peer.count(addr) == 0; }

int OfiMethod::register_memory(Request& r) {
    const bool send = !r.is_recv;
    int rc = registrations_.acquire(r.data, r.length, send, r.desc, r.own_mr);
    // Memory the provider will not register (read-only data, say) is copied when small.
    if (rc != 0 && r.role == Request::Role::send && r.length <= sizes_.eager_bytes) {
        const auto* from = static_cast<const std::byte*>(r.data);
        r.bytes.assign(from, from + r.length);
        r.data = r.bytes.data();
        rc = registrations_.acquire(r.data, r.length, send, r.desc, r.own_mr);
    }
    return rc;
}

bool OfiMethod::drain_backlog(kit::Deadlines::Clock::time_point now, bool completions) {
    if (backlog_.by_peer.empty()) return false;
    if (!completions && !backlog_.pause.due(now)) return false;
    bool posted = false, refused = false;
    // By key, found again each time: an error a post meets may post more (and rehash).
    std::vector<fi_addr_t> addrs;
    addrs.reserve(backlog_.by_peer.size());
    for (const auto& entry : backlog_.by_peer) addrs.push_back(entry.first);
    for (fi_addr_t addr : addrs) {
        for (;;) {
            auto it = backlog_.by_peer.find(addr);
            if (it == backlog_.by_peer.end()) break;
            if (it->second.empty()) {
                backlog_.by_peer.erase(it);
                break;
            }
            Request& request = *it->second.front();
            const int rc = try_post(request);
            if (rc == -FI_EAGAIN) {
                refused = true;
                break;
            }
            it->second.pop_front();
            posted = true;
            if (rc != 0) on_error(request, bmi_error(rc));
        }
    }
    if (posted) backlog_.pause.posted();
    if (refused)
        if (auto at = backlog_.pause.refused(now))
            timers_.schedule({0, kit::DeadlineKind::connect_retry}, *at);
    return posted;
}

void OfiMethod::repost_buffer(Request& buffer) {
    buffer.data = buffer.bytes.data();
    buffer.length = buffer.bytes.size();
    buffer.addr = FI_ADDR_UNSPEC;
    buffer.tag = 0;
    buffer.ignore = control_ignore;
    submit(buffer);
}

bool OfiMethod::read_completions() {
    if (!own_region_free()) return false;
    bool moved = false;
    fi_cq_tagged_entry entries[completions_per_read];
    fi_addr_t sources[completions_per_read];
    for (;;) {
        const auto n = fi_cq_readfrom(fabric_.cq(), entries, completions_per_read, sources);
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry error{};
            if (fi_cq_readerr(fabric_.cq(), &error, 0) != 1) return moved;
            on_error(Request::of(error.op_context), bmi_error(error.err));
            moved = true;
            continue;
        }
        if (n <= 0) return moved;
        for (decltype(+n) i = 0; i < n; ++i)
            on_completion(Request::of(entries[i].op_context), entries[i], sources[i]);
        moved = true;
        if (n < completions_per_read) return moved;
    }
}

void OfiMethod::on_completion(Request& request, const fi_cq_tagged_entry& entry, fi_addr_t source) {
    if (request.role == Request::Role::sweep) {
        sweep_.on_found(fabric_);
        return;
    }
    ++completions_taken_;
    if (request.role != Request::Role::buffer) {
        std::shared_ptr<OfiPeer> damaged;  // sent data that failed authentication
        if (request.bounced && request.is_recv)
            scatter_pieces(std::span(request.bytes).first(std::min(entry.len, request.length)),
                           segments_of(*request.op), request.chunk_offset);
        else if (request.role == Request::Role::data_recv && !open_piece(request, entry.len))
            damaged = peer_at(request.addr);
        if (request.role == Request::Role::grant_recv)
            on_grant_recv_end(request, 0, entry.len);
        else
            end_request(request, 0);
        if (damaged && !damaged->lost) lose(*damaged, -BMI_EPROTO);
        return;
    }
    request.length = fabric_.body_length(entry);
    request.tag = fabric_.tag_of(entry);
    request.addr = source;
    on_message(request, source);
}

void OfiMethod::on_error(Request& request, int error) {
    if (request.role != Request::Role::sweep) ++completions_taken_;
    switch (request.role) {
        case Request::Role::buffer:
            // A message too large for a buffer is no message of ours: dropped.
            repost_buffer(request);
            return;
        case Request::Role::sweep:
            sweep_.on_end();
            return;
        case Request::Role::grant_recv:
            on_grant_recv_end(request, error, 0);
            return;
        case Request::Role::control: {
            const auto kind = kind_of(request.tag);
            if (kind == Kind::hello)
                if (auto peer = peer_at(request.addr)) {
                    peer->state = OfiPeer::State::fresh;
                    flush_waiting(*peer, error);
                }
            const fi_addr_t addr = request.addr;
            release(request);
            if (kind == Kind::ping) on_failed_ping(addr, error);
            return;
        }
        default:
            end_request(request, error);
    }
}

void OfiMethod::end_request(Request& request, int error) {
    Operation* op = request.op;
    release(request);
    if (op == nullptr) return;
    auto& slots = method_slots<OpSlots>(*op);
    if (error != 0 && slots.error == 0) slots.error = error;
    if (--slots.pending == 0) finish(*op, slots.error);
}

bool OfiMethod::sweep_unasked(kit::Deadlines::Clock::time_point now) {
    if (!fabric_.keeps_unasked()) return false;
    const std::uint64_t before = sweep_.dropped();
    const std::uint64_t taken = completions_taken_;
    if (!sweep_.start(fabric_, now)) return false;
    // Each peek's completion posts the next: the whole round now, while the queue yields them.
    while (sweep_.running() && read_completions()) {
    }
    // A round that found nothing is no traffic: it must not keep a waiting caller spinning.
    // But the queue it read may have held a message or a send's end, which is: the caller
    // must look again rather than sleep on what is already done.
    return sweep_.dropped() != before || completions_taken_ != taken;
}

void OfiMethod::cancel_data_recvs(const Operation& op) {
    for (auto& [request, owned] : requests_)
        if (request->op == &op && Request::receives_data(request->role))
            fi_cancel(&fabric_.ep()->fid, &request->context);
}

void OfiMethod::progress() {
    if (provider_.name.empty()) return;
    if (waiting_.naps()) waiting_.clear();
    const bool completions = read_completions();
    if (completions) waiting_.traffic();
    if (!sealed_.unsealed.empty() && seal_next()) waiting_.traffic();
    // One reading of the clock for the pass: it runs between every two polls of a spin.
    const auto now = kit::Deadlines::Clock::now();
    sweep_unasked(now);
    drain_backlog(now, completions);
    if (!region_locks_.dead_holders_found.empty()) lose_dead_holders();
    retry_parked();
    run_deadlines(now);
}

bool OfiMethod::accept_wake_fd(int fd, std::uint64_t tag) {
    // Alone in an instance, the control layer sleeps in our epoll set and skips its polling
    // pass before each sleep: before_sleep() reads the queue anyway, and each read of it is a
    // pass through the provider's progress (a system call on tcp). Our own fds carry tags 0 to
    // 2 (ofi_method_impl.hpp), the control layer's its own, so theirs are never taken for ours.
    return support::add_wake_fd(epoll_fd_, fd, tag);
}

void OfiMethod::progress_events(std::span<const epoll_event> ready) {
    // A pass reads the queue, the timers and the naps alike; only the provider's descriptor
    // matters here: it may say a dial the backlog waits on is done, so the backlog tries now.
    ++counted_.handed_wakeups;
    if (std::any_of(ready.begin(), ready.end(),
                    [](const epoll_event& e) { return e.data.u64 == provider_tag; }))
        backlog_.pause.woken();
    progress();
}

bool OfiMethod::before_sleep() {
    if (provider_.name.empty()) return false;
    const bool completions = read_completions();
    const auto now = kit::Deadlines::Clock::now();
    bool moved = sweep_unasked(now) || completions;
    moved = (!sealed_.unsealed.empty() && seal_next()) || moved;
    moved = drain_backlog(now, completions) || moved;
    moved = retry_parked() || moved;
    moved = run_deadlines(now) || moved;
    if (!region_locks_.dead_holders_found.empty()) {
        lose_dead_holders();
        moved = true;
    }
    if (moved) {
        waiting_.traffic();
        return true;
    }
    using Load = Waiting::Load;
    const Load load = in_flight_.data_requests > 0 ? Load::transfer
                      : in_flight_.ops_waiting > 0 ? Load::operations
                                                   : Load::idle;
    if (waiting_.before_sleep(load, [this] { return read_completions() || retry_parked(); }))
        return true;
    return !waiting_.naps() && !fabric_.can_sleep();
}

}  // namespace bmi::method::ofi
