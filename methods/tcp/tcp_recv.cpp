// SPDX-License-Identifier: LGPL-2.1-or-later
// Input side: reads frames, checks every header before using it, and matches messages to
// posted receives (per peer and tag, in header arrival order).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "methods/tcp/tcp_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::tcp {

namespace {
// Bounds the frames one connection handles per progress() so that one busy socket cannot
// starve the others; level-triggered epoll brings us back for the rest.
constexpr int reads_per_progress = 64;

std::size_t iov_total(const iovec* iov, int n) {
    std::size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    return total;
}
}  // namespace

int TcpMethod::post_recv(Operation& op) {
    TcpPeer& peer = *static_cast<TcpPeer*>(op.peer);
    op.transferred = 0;
    op.actual_size = 0;
    if (auto arrival = peer.arrivals.take(op.tag)) {
        uncharge(peer, *arrival);
        match_arrival(op, *arrival);
        resume_paused();
        return 0;
    }
    if (unreachable(peer)) return -BMI_ECONNRESET;  // nothing more can come from it
    slots(op).connection = nullptr;
    peer.posted_recvs.push_back(op);
    place(op, Place::recv_posted);
    if (op.total_size > v2_eager_limit) maybe_grant(peer, op.total_size);
    // A frame for this tag may be held back by the early-data budget: it can now go straight
    // into this receive.
    if (!held_.paused.empty()) resume_paused();
    return 0;
}

void TcpMethod::match_arrival(Operation& op, Arrival& arrival) {
    if (arrival.kind == Arrival::Kind::eager) {
        if (arrival.size > op.total_size) {
            finish(op, -BMI_EMSGSIZE);
            return;
        }
        copy_to_segments(op, arrival.data.get(), arrival.size);
        op.actual_size = arrival.size;
        finish(op, 0);
        return;
    }
    Connection* c = find_connection(arrival.connection_id);
    if (c == nullptr || c->closed) {
        finish(op, -BMI_ECONNRESET);
        return;
    }
    if (arrival.kind == Arrival::Kind::rts) {
        if (arrival.size > op.total_size) {
            queue_control(*c, Mode::nak, arrival.tag, arrival.cookie);
            finish(op, -BMI_EMSGSIZE);
            flush(*c);
            return;
        }
        accept_rts(*c, op, arrival.cookie, arrival.size);
        return;
    }
    read_body_into(*c, op, arrival.size);
    // Part of the body may sit in the read-ahead buffer, where no epoll event announces it.
    on_readable(*c);
}

Operation* TcpMethod::take_posted_recv(TcpPeer& peer, bmi_msg_tag_t tag) {
    return peer.posted_recvs.take_first(tag);
}

void TcpMethod::on_readable(Connection& c) {
    c.reader.drained = false;
    // Buffered input is always worked off (it is bounded, and no epoll event would bring us
    // back for it); only new reads from the socket count against the fairness bound.
    for (int i = 0; !c.closed; ++i) {
        if (i >= reads_per_progress && !c.buffered_input()) break;
        if (!read_step(c)) break;
    }
    update_interest(c);
}

// Reads what the current phase needs; false once the socket is drained or reading is paused.
bool TcpMethod::read_step(Connection& c) {
    FrameReader& r = c.reader;
    iovec iov[iov_batch + 1];  // the phase's pieces, and room for read_socket's tail
    std::uint8_t sink_buffer[16384];
    const int n = r.next_iov(iov, header_bytes_needed(c.dialect(), r.head_bytes()), sink_buffer,
                             sizeof sink_buffer);
    if (n == 0) return false;
    ssize_t got;
    if (r.has_buffered()) {
        got = static_cast<ssize_t>(r.take_buffered(iov, n));
    } else {
        if (r.drained) return false;  // spares the read that would only say EAGAIN
        got = read_socket(c, iov, n);
        if (got < 0) return false;
    }
    const auto needed = [&c](std::span<const std::uint8_t> have) {
        return header_bytes_needed(c.dialect(), have);
    };
    switch (r.advance(static_cast<std::size_t>(got), needed)) {
        case ReadEvent::header:
            on_header(c);
            break;
        case ReadEvent::scratch_body:
            on_scratch_body(c);
            break;
        case ReadEvent::op_body:
            body_op_done(c);
            break;
        case ReadEvent::none:
            break;
    }
    return true;
}

ssize_t TcpMethod::read_socket(Connection& c, iovec* iov, int n) {
    FrameReader& r = c.reader;
    const std::size_t want = iov_total(iov, n);
    // A connection through its handshake gets the read-ahead; the few frames of a handshake
    // do without, so a connection that has proven nothing holds no buffer of ours.
    const bool unproven = c.state != ConnState::established;
    // A large remainder of a payload goes straight to its destination, and so does a header
    // expected to announce one (FrameReader::header_alone).
    const bool large = r.phase == ReadPhase::header
                           ? r.header_alone
                           : r.phase != ReadPhase::discard && want >= read_ahead_size;
    const bool direct = unproven || large;
    // Behind a payload only the next header is read ahead: it saves the read that would find
    // the socket empty (a short read says so), and it drags none of the next payload along.
    std::size_t ahead = read_ahead_size;
    if (direct)
        ahead = unproven || r.phase == ReadPhase::header ? 0 : header_bytes_needed(c.dialect(), {});
    iovec ahead_iov{unproven ? r.inbuf.get() : r.read_ahead(), ahead};
    if (direct && ahead > 0) iov[n] = ahead_iov;
    const bool wait = std::exchange(polling_.wait_in_read, false);
    if (c.records) return read_records(c, iov, n, want, ahead, direct, ahead_iov, wait);
    const ssize_t read = direct ? receive_vector(c.fd, iov, n + (ahead > 0 ? 1 : 0), wait)
                                : receive_vector(c.fd, &ahead_iov, 1, wait);
    if (read == 0) {
        connection_broken(c, -BMI_ECONNRESET);
        return -1;
    }
    if (read < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            connection_broken(c, support::bmi_error_from_errno(errno));
        return -1;
    }
    return static_cast<ssize_t>(
        r.land_read(static_cast<std::size_t>(read), want, ahead, direct, iov, n));
}

// The same as a socket read, from the plaintext of whole records.
ssize_t TcpMethod::read_records(Connection& c, iovec* iov, int n, std::size_t want,
                                std::size_t ahead, bool direct, const iovec& ahead_iov, bool wait) {
    int error = 0;
    const std::uint64_t reads_before = c.records->socket_reads();
    // Only a receive's buffer takes records straight from the socket: it stays where it is.
    const bool into_receive = direct && c.reader.phase == ReadPhase::body_op;
    const ssize_t read =
        direct ? c.records->read(c.fd, iov, n + (ahead > 0 ? 1 : 0), wait, error, into_receive)
               : c.records->read(c.fd, &ahead_iov, 1, wait, error);
    // Bytes of a record not whole yet still move the stall clock (land_read counts the rest).
    if (read <= 0 && c.records && c.records->socket_reads() != reads_before)
        ++c.reader.reads_with_data;
    if (read < 0) {
        if (error == -BMI_EPROTO) {
            BMI_LOG(tcp, "tcp: %s on connection %llu from %s; closing it", c.records->failure(),
                    static_cast<unsigned long long>(c.id), describe(c.remote).c_str());
            fail_connection(c, -BMI_EPROTO, true);
        } else if (error != 0) {
            connection_broken(c, error);
        }
        return -1;
    }
    return static_cast<ssize_t>(
        c.reader.land_read(static_cast<std::size_t>(read), want, ahead, direct, iov, n));
}

void TcpMethod::protocol_error(Connection& c, const char* what) {
    BMI_LOG(tcp,
            "tcp: protocol error from %s (%s, magic %u mode 0x%x size %llu cookie %llu); "
            "closing connection %llu",
            describe(c.remote).c_str(), what, c.reader.header.magic,
            static_cast<unsigned>(c.reader.header.mode),
            static_cast<unsigned long long>(c.reader.header.size),
            static_cast<unsigned long long>(c.reader.header.cookie),
            static_cast<unsigned long long>(c.id));
    // The stream is out of step: nothing more from this connection can be trusted, and the
    // receives posted for its peer fail now rather than wait for an application's cancel.
    fail_connection(c, -BMI_EPROTO, true);
}

void TcpMethod::on_header(Connection& c) {
    const Framing framing = framing_of(c.dialect(), c.reader.head_bytes());
    const Header h = c.reader.take_header(framing);
    // A client that offered v2 sends until our answer tells it our limit (and its HELLO says it
    // read the answer) as toward a peer that states none: up to that peer's limit.
    const bool limit_untold = c.await_hello || (c.state == ConnState::await_first &&
                                                framing == Framing::orangefs && offers_upgrade(h));
    const bmi_size_t unexpected_bound =
        limit_untold ? std::max(unexpected_limit_, default_unexpected_limit) : unexpected_limit_;
    if (check_header(h, c.dialect(), unexpected_bound, c.eager_limit) < 0) {
        protocol_error(c, "bad header");
        return;
    }
    // Frames come in kinds: a large one is usually followed by another (an RTS by its DATA).
    // A GRANT's size is not its own payload.
    c.reader.header_alone = h.mode != Mode::grant && h.size >= read_ahead_size;
    // A first frame other than HELLO comes from a legacy client (OrangeFS's or the standalone
    // library's, by its magic), whatever our own dialect: that framing for good.
    if (c.state == ConnState::await_first && h.mode != Mode::hello) {
        const bool offer = framing == Framing::orangefs && offers_upgrade(h);
        if (keys_.keyed()) {
            if (offer)
                refuse(c, kit::Refusal::offers_no_proof, hello_magic);
            else
                refuse(c, kit::Refusal::legacy_first_frame);
            return;
        }
        c.state = ConnState::established;
        c.framing = framing;
        bind_peer(c, "", !offer);
        if (offer) accept_offer(c);
    }
    // The acceptor's first frame answers our offer: anything but HELLO_ACK declines it.
    if (c.offering && h.mode != Mode::hello_ack) offer_declined(c);
    if (h.mode == Mode::eager && h.cookie != 0 && !claim_grant(c)) return;
    if (!admit_early(c)) return;
    dispatch_frame(c);
}

void TcpMethod::dispatch_frame(Connection& c) {
    const Header& h = c.reader.header;
    switch (h.mode) {
        case Mode::eager:
            // A posted receive takes the payload straight from the socket: no scratch copy,
            // and a large one never sits in our memory.
            if (Operation* op = take_posted_recv(*c.peer, tag_of(h))) {
                settle_grant(c);
                release_reservation(c);
                read_body_into(c, *op, static_cast<bmi_size_t>(h.size));
                return;
            }
            [[fallthrough]];
        case Mode::hello:
        case Mode::hello_ack:
        case Mode::hello_proof:
        case Mode::unexpected:
            // An unexpected payload is read whole before it is charged to the quota: a peer
            // that trickles a body holds only this connection's scratch, never the quota
            // that every other peer's requests need.
            c.reader.start_scratch(static_cast<std::size_t>(h.size));
            if (h.size == 0)
                on_scratch_body(c);
            else
                c.reader.phase = ReadPhase::body_scratch;
            return;
        case Mode::rendezvous:
            on_legacy_rend(c);
            release_reservation(c);
            return;
        case Mode::rts:
            on_rts(c);
            release_reservation(c);
            return;
        case Mode::cts:
        case Mode::nak:
            on_cts(c);
            return;
        case Mode::data:
            on_data(c);
            return;
        case Mode::grant:
            on_grant(c);
            return;
    }
}

void TcpMethod::on_scratch_body(Connection& c) {
    c.reader.phase = ReadPhase::header;
    if (c.reader.header.mode == Mode::eager) {
        on_eager(c, tag_of(c.reader.header), c.reader.scratch.data(),
                 static_cast<bmi_size_t>(c.reader.header.size));
        release_reservation(c);
        // A granted frame may be megabytes: its scratch is not kept for the next small one.
        if (c.reader.scratch.capacity() > static_cast<std::size_t>(v2_large_eager_limit)) {
            returner_.freed(static_cast<std::int64_t>(c.reader.scratch.capacity()));
            std::vector<std::uint8_t>().swap(c.reader.scratch);
        }
        return;
    }
    if (c.reader.header.mode == Mode::unexpected) {
        deliver_unexpected(c);
        return;
    }
    if (c.reader.header.mode == Mode::hello_proof) {
        on_hello_proof(c);
        return;
    }
    on_hello(c, c.reader.header.mode == Mode::hello_ack);
}

void TcpMethod::on_hello(Connection& c, bool ack) {
    auto hello = decode_hello_body(c.reader.scratch);
    if (!hello) {
        protocol_error(c, "bad HELLO body");
        return;
    }
    c.eager_limit = v2_eager_limit_for(hello->features);
    c.peer_takes_grants = (hello->features & feature_grants) != 0;
    c.peer_unexpected_limit = stated_unexpected_limit(hello->features);
    if (ack ? !on_keyed_ack(c, *hello) : on_keyed_hello(c, *hello)) return;
    c.framing = Framing::v2;
    c.state = ConnState::established;
    if (ack) {
        BMI_LOG(tcp, "tcp: %s answered %s; using v2 frames%s", describe(c.remote).c_str(),
                c.offering ? "our offer" : "HELLO", keys_.keyed() ? ", key proven" : "");
        if (c.offering) {
            // Our HELLO ends our OrangeFS frames: the acceptor reads v2 after it. Frames
            // already taken for writing are encoded and go before it.
            c.offering = false;
            c.held_for_answer = false;
            OutFrame reply;
            reply.body = encode_hello(hello_to_send(c), false);
            c.writer.control_queue.push_back(std::move(reply));
        }
    } else if (c.await_hello) {
        // The client we answered is through: its frames are v2 from here on. Its announced
        // address routes nothing (SPEC §6), as for any keyless HELLO.
        c.await_hello = false;
        c.held_for_answer = false;
        c.peer->announced = hello->address;
        BMI_LOG(tcp, "tcp: connection %llu upgraded to v2%s%s",
                static_cast<unsigned long long>(c.id),
                hello->address.empty() ? "" : ", announcing ", hello->address.c_str());
    } else if ((hello->features & feature_same_node) != 0) {
        answer_same_node(c, Hello{hello_features(), own_address(c)});
        return;
    } else {
        bind_peer(c, hello->address, false);
        OutFrame reply;
        // Answer under the magic the HELLO came with, so an older libbmi client accepts it.
        reply.body =
            encode_hello(Hello{hello_features(), own_address(c)}, true, c.reader.header.magic);
        c.writer.control_queue.push_back(std::move(reply));
    }
    flush(c);
}

void TcpMethod::on_eager(Connection& c, bmi_msg_tag_t tag, const std::uint8_t* data,
                         bmi_size_t size) {
    TcpPeer& peer = *c.peer;
    if (Operation* op = take_posted_recv(peer, tag)) {
        settle_grant(c);
        if (size > op->total_size) {
            finish(*op, -BMI_EMSGSIZE);
            return;
        }
        copy_to_segments(*op, data, size);
        op->actual_size = size;
        finish(*op, 0);
        return;
    }
    // size was checked against the dialect's eager limit before the payload was read.
    Arrival arrival;
    arrival.kind = Arrival::Kind::eager;
    arrival.tag = tag;
    arrival.size = size;
    arrival.data = std::make_unique<std::uint8_t[]>(static_cast<std::size_t>(size) + 1);
    if (size > 0) std::memcpy(arrival.data.get(), data, static_cast<std::size_t>(size));
    // Under a grant its room was reserved: the reservation becomes the arrival's charge.
    arrival.granted = c.reader.frame_grant != 0;
    settle_grant(c);
    keep_arrival(c, std::move(arrival));
}

void TcpMethod::on_rts(Connection& c) {
    const Header& h = c.reader.header;
    // A cookie names one transfer of this connection until its last DATA chunk: a second RTS
    // with it would make two receives wait on one entry of `incoming`.
    if (c.peer->arrivals.announced(c.id, h.cookie) || c.reader.incoming.count(h.cookie) != 0) {
        protocol_error(c, "duplicate RTS cookie");
        return;
    }
    const auto size = static_cast<bmi_size_t>(h.size);
    if (Operation* op = take_posted_recv(*c.peer, tag_of(h))) {
        if (size > op->total_size) {
            queue_control(c, Mode::nak, tag_of(h), h.cookie);
            finish(*op, -BMI_EMSGSIZE);
            flush(c);
            return;
        }
        accept_rts(c, *op, h.cookie, size);
        return;
    }
    // Nothing is buffered for an unmatched RTS: the sender keeps the data until our CTS.
    Arrival arrival;
    arrival.kind = Arrival::Kind::rts;
    arrival.tag = tag_of(h);
    arrival.size = size;
    arrival.connection_id = c.id;
    arrival.cookie = h.cookie;
    keep_arrival(c, std::move(arrival));
}

void TcpMethod::accept_rts(Connection& c, Operation& op, std::uint64_t cookie, bmi_size_t size) {
    op.actual_size = size;
    op.transferred = 0;
    slots(op).cookie = cookie;
    slots(op).connection = &c;
    place(op, Place::recv_data);
    c.reader.incoming.emplace(cookie, &op);
    restart_stall_clock(c);
    queue_control(c, Mode::cts, op.tag, cookie);
    flush(c);
}

void TcpMethod::on_cts(Connection& c) {
    auto it = c.writer.await_cts.find(c.reader.header.cookie);
    if (it == c.writer.await_cts.end()) {
        protocol_error(c, "CTS for no RTS of ours");
        return;
    }
    Operation& op = *it->second;
    c.writer.await_cts.erase(it);
    if (c.reader.header.mode == Mode::nak) {
        finish(op, -BMI_EMSGSIZE);
        return;
    }
    c.writer.data_queue.push_back(op);
    place(op, Place::send_data);
    flush(c);
}

void TcpMethod::on_data(Connection& c) {
    auto it = c.reader.incoming.find(c.reader.header.cookie);
    const auto size = static_cast<bmi_size_t>(c.reader.header.size);
    if (it == c.reader.incoming.end() || it->second->transferred + size > it->second->actual_size) {
        protocol_error(c, "DATA for no cleared transfer, or past its end");
        return;
    }
    c.reader.start_body(*it->second, size);
}

void TcpMethod::on_legacy_rend(Connection& c) {
    const auto size = static_cast<bmi_size_t>(c.reader.header.size);
    if (Operation* op = take_posted_recv(*c.peer, tag_of(c.reader.header))) {
        read_body_into(c, *op, size);
        return;
    }
    // The payload follows the header with no way to defer it: stop reading until a receive
    // for it is posted (what OrangeFS does too), which keeps memory bounded.
    Arrival arrival;
    arrival.kind = Arrival::Kind::legacy_rend;
    arrival.tag = tag_of(c.reader.header);
    arrival.size = size;
    arrival.connection_id = c.id;
    keep_arrival(c, std::move(arrival));
    c.reader.phase = ReadPhase::wait_match;
}

void TcpMethod::read_body_into(Connection& c, Operation& op, bmi_size_t size) {
    restart_stall_clock(c);  // a paused connection (wait_match) reads again
    c.reader.phase = ReadPhase::header;
    if (size > op.total_size) {
        if (size > 0) c.reader.start_discard(size);
        finish(op, -BMI_EMSGSIZE);
        return;
    }
    op.actual_size = size;
    op.transferred = 0;
    if (size == 0) {
        finish(op, 0);
        return;
    }
    slots(op).connection = &c;
    place(op, Place::recv_data);
    c.reader.start_body(op, size);
}

void TcpMethod::body_op_done(Connection& c) {
    Operation* op = c.reader.end_body();
    if (op->transferred < op->actual_size) return;  // more DATA chunks to come
    // Only a transfer our CTS cleared is listed (an EAGER or legacy body never is), and a
    // receive's cookie is 0 or another connection's.
    auto& incoming = c.reader.incoming;
    if (auto it = incoming.find(slots(*op).cookie); it != incoming.end() && it->second == op)
        incoming.erase(it);
    finish(*op, 0);
}

bool TcpMethod::deliver_unexpected(Connection& c) {
    const auto size = static_cast<bmi_size_t>(c.reader.header.size);
    void* buffer = sink_.alloc_unexpected(*c.peer, size);
    if (buffer == nullptr) {
        // Quota full: hold the message in scratch and read nothing more from this peer until
        // memory comes back (retry_unexpected).
        // Its two callers: the read path, and retry_unexpected() with the list taken out.
        held_.waiting_unexpected.push_back(c.id);
        c.reader.phase = ReadPhase::wait_unexpected;
        return false;
    }
    if (size > 0) std::memcpy(buffer, c.reader.scratch.data(), static_cast<std::size_t>(size));
    if (c.reader.phase == ReadPhase::wait_unexpected) restart_stall_clock(c);
    c.reader.phase = ReadPhase::header;
    sink_.register_peer(c.peer);
    sink_.deliver_unexpected(c.peer, buffer, size, tag_of(c.reader.header),
                             c.reader.header.msg_class);
    return true;
}

}  // namespace bmi::method::tcp
