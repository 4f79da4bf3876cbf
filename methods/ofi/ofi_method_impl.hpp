// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's state, shared by its .cpp files (doc/methods/ofi.md has the design).
#pragma once

#include <rdma/fabric.h>
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "methods/arrivals_by_tag.hpp"
#include "methods/completion_router.hpp"
#include "methods/early_budget.hpp"
#include "methods/kit/deadlines.hpp"
#include "methods/kit/key_handshake.hpp"
#include "methods/kit/source_admission.hpp"
#include "methods/method.hpp"
#include "methods/ofi/ofi_address_table.hpp"
#include "methods/ofi/ofi_fabric.hpp"
#include "methods/ofi/ofi_handshake.hpp"
#include "methods/ofi/ofi_memory.hpp"
#include "methods/ofi/ofi_method.hpp"
#include "methods/ofi/ofi_order.hpp"
#include "methods/ofi/ofi_retry_pause.hpp"
#include "methods/ofi/ofi_shm.hpp"
#include "methods/ofi/ofi_shm_lock.hpp"
#include "methods/ofi/ofi_staging.hpp"
#include "methods/ofi/ofi_waiting.hpp"
#include "methods/ofi/ofi_wire.hpp"
#include "support/keys/numbered_records.hpp"

namespace bmi::method::ofi {

// A message that came before its receive: an eager body, or a large message's announcement.
struct Arrival {
    bmi_msg_tag_t tag = 0;
    bool announced = false;  // an Rts: the data waits at the sender
    bmi_size_t size = 0;
    std::uint32_t transfer = 0;
    std::uint32_t piece = 0;   // the Rts's: what its data moves in (0: as our chunks)
    std::uint64_t record = 0;  // encrypted: the Rts's record number, which names its data's key
    std::int64_t cost = 0;     // what it holds of the early budget
    std::vector<std::byte> body;
};

// What a peer can make us hold and how long we wait on it (doc/RELIABILITY.md); the settings
// in ofi_settings.cpp say each one's default and range.
struct Limits {
    EarlyBudget::Limits early;
    std::chrono::milliseconds setup{};       // a handshake, from our hello or our answer
    std::chrono::milliseconds stall{};       // a large message's data, between chunks
    std::chrono::milliseconds send{};        // the provider completing any send to the peer
    std::chrono::milliseconds rendezvous{};  // a CTS (or refusal) for our RTS
    std::chrono::milliseconds silence{};     // a peer we wait on, heard from or answering
    std::size_t pending_per_source = 0;      // keyed hellos not yet proven, per host
    std::size_t pending_total = 0;           // the same, all hosts
    std::chrono::milliseconds shm_sweep{};   // an ofi+shm server's look at /dev/shm
};
// The bookkeeping an arrival costs beyond its payload: it bounds the count of empty ones.
inline constexpr std::int64_t arrival_overhead = 256;

struct OfiPeer final : Peer {
    enum class State : std::uint8_t {
        fresh,     // looked up, nothing sent yet
        greeting,  // our hello left; sends wait for the answer
        answered,  // acceptor, keyed: our answer left; only its proof is taken from it
        ready,     // it knows our address (and proved the key): traffic flows both ways
        departed,  // it said bye
    };
    fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
    std::string address;  // what describe_peer says: the looked-up or announced address
    std::string host;
    std::string endpoint;  // the provider address we reach it at, as the handshake binds it
    State state = State::fresh;
    // Its traffic's encryption since the last handshake (doc/security.md, "ofi"); null: plain.
    std::unique_ptr<support::keys::NumberedRecords> records;
    // The largest eager and unexpected messages its receive buffers take, as its handshake
    // said (ofi_handshake.hpp's BufferLimits); unbounded until it says.
    std::size_t eager_takes = SIZE_MAX;
    std::size_t unexpected_takes = SIZE_MAX;
    // Until ready, what we send it is the handshake's: hello, answer, proof or refusal.
    bool handshaking() const { return state != State::ready && state != State::departed; }
    // It said hello to us and we know no listen address of it: once departed, unreachable.
    bool reached_us = false;
    // It reached us and was taken as gone past a deadline: the control layer drops it. (One we
    // looked up is only departed, and greeted again by the next send.)
    bool lost = false;
    // shm: whether its endpoint is one of this process's (ofi_shm.hpp), once looked at.
    std::optional<bool> in_process;
    // shm: the token its messages carry (Fabric::token), from its hello or its answer to
    // ours; 0 until then. What comes under its fi_addr without it is not its.
    std::uint64_t token = 0;
    // shm, a peer we greet: its region file when its entry was made, or when we first greeted
    // it if it had none then (ShmRegionFile). Another file under its name is another process,
    // which only a new entry reaches.
    std::optional<ShmRegionFile> region;
    // shm: a look at its region's lock (ShmRegionLock), opened at our first send to it; null
    // where the region's layout is not known.
    std::unique_ptr<ShmRegionLock> region_lock;
    bool region_lock_opened = false;
    std::deque<Operation*> waiting;  // sends held until the answer, or until credits come
    // Credits (ofi_wire.hpp): how many more of our costly messages it takes; how many of its
    // we hold that we have not given back, and of those how many left their buffers (owed).
    std::uint32_t credits = peer_credits;
    std::uint32_t in_hand = 0;
    std::uint32_t owed = 0;
    std::uint64_t credits_got = 0;  // all it gave back: progress for the send deadline
    // Grants (ofi_wire.hpp's Grant): the expected messages we sent it and took from it since
    // the handshake, and its grants we may still use, by BMI tag.
    std::uint64_t expected_sent = 0;
    std::uint64_t expected_seen = 0;
    std::unordered_map<bmi_msg_tag_t, Grant> grants;
    ArrivalsByTag<Arrival> arrivals;
    EarlyBudget::Account early;
    std::uint32_t parked = 0;  // its messages waiting in receive buffers (OfiMethod::held_)
    MessageOrder order;        // the numbers of our ordered messages and of its
    // Sends (and data receives) of ours to it in the provider or the backlog, and how many
    // ended: the send and stall deadlines watch the count move while any are out.
    std::uint32_t sends_out = 0;
    std::uint32_t data_recvs_out = 0;
    std::uint64_t sends_done = 0;
    std::uint64_t chunks_done = 0;
    kit::ProgressDeadline send_clock;
    // Sends wait for credits it owes us (it has stopped taking messages, or is slow to).
    bool waits_for_credits() const { return state == State::ready && !waiting.empty(); }
    // What the send deadline watches move: our sends it completed and credits it gave back.
    std::uint64_t send_progress() const { return sends_done + credits_got; }
    kit::ProgressDeadline stall_clock;
    // What the stall deadline waits for: a large message's data, or a message that others
    // wait behind (ofi_order.hpp); and what it watches move.
    bool owes_data() const { return data_recvs_out > 0 || order.any_waiting(); }
    std::uint64_t stall_progress() const { return chunks_done + order.taken_count(); }
    // Messages taken from it since it was looked up: the silence deadline watches them move
    // while receives of ours wait on it, or while it is a client of ours; `asked` is their
    // count when we last sent it a ping, `unanswered` the pings since it was last heard.
    std::uint64_t heard = 0;
    std::optional<std::uint64_t> asked;
    std::uint32_t unanswered = 0;
    kit::ProgressDeadline silence_clock;
    // Our last probe to it (we looked it up) and `heard` then: a reset counts only if it
    // answers that probe and nothing else came since (a pong says it knows us).
    struct ProbeSent {
        support::keys::Nonce nonce{};
        std::uint64_t heard = 0;
    };
    std::optional<ProbeSent> probe;
    kit::ProgressDeadline probe_clock;  // a wait on it silent for OfiMethod::probe_after
    bool waited_on() const { return state == State::ready && !posted_recvs.empty(); }
    // A wait that a probe may end: a receive, or over shm also a send the provider has not
    // completed (a send into the region of a process that ended never completes).
    bool probe_owed(bool over_shm) const {
        return waited_on() || (over_shm && state == State::ready && sends_out > 0);
    }
    // A ready client, idle or not, is pinged while silent too: a ping to an ended process
    // never completes (the send deadline takes it) or fails, as tcp's keepalive finds it.
    bool silence_watched() const {
        return state == State::ready && (reached_us || !posted_recvs.empty());
    }
};

// One libfabric operation in flight. libfabric hands back &context, the first member.
struct Request {
    static Request& of(void* context) { return *static_cast<Request*>(context); }

    enum class Role : std::uint8_t {
        buffer,      // a posted receive buffer for control and small messages
        control,     // a control message of our own, body in `bytes`
        send,        // an eager message from the op's buffer
        data_send,   // one chunk of a large message
        data_recv,   // one chunk of a large message, into the op's buffer
        grant_recv,  // a large message under our grant, into the op's buffer (not timed)
        sweep,       // UnaskedSweep's peek
    };
    // A grant's receive too: its data moves only while this process polls, as a chunk's does.
    static constexpr bool is_data(Role role) {
        return role == Role::data_send || role == Role::data_recv || role == Role::grant_recv;
    }
    // Writes into the op's buffer: cancelled, not let go of, when its op must end early.
    static constexpr bool receives_data(Role role) {
        return role == Role::data_recv || role == Role::grant_recv;
    }
    fi_context2 context{};
    Role role = Role::buffer;
    bool is_recv = false;
    Operation* op = nullptr;
    std::vector<std::byte> bytes;
    // Where the provider needs local registration: the descriptor of `data`, and the
    // registration made for this operation alone (null for BMI_memalloc memory).
    void* desc = nullptr;
    fid_mr* own_mr = nullptr;
    // What was posted, kept for a repost after -FI_EAGAIN; for a filled buffer, what came.
    void* data = nullptr;
    std::size_t length = 0;
    fi_addr_t addr = FI_ADDR_UNSPEC;
    std::uint64_t tag = 0;
    std::uint64_t ignore = 0;
    std::uint64_t record = 0;  // a filled buffer's record number, once opened
    std::uint64_t token = 0;   // a filled buffer's sender's token (Fabric::token)
    bool counted = false;      // in its peer's sends_out or data_recvs_out
    bool to_stranger = false;  // a reset to an endpoint we know nothing of (in_flight_.resets_out)
    // A chunk of a large message (OfiMethod::place_chunk) starts at `chunk_offset` of what its op
    // moves: its segments' bytes, or its staging's where it is sealed. A chunk of a list takes
    // the iovecs the provider takes in one operation (empty: `data` alone), or is `bounced`
    // through `bytes` where it would take more, a receive scattered to the segments once done.
    bool bounced = false;
    std::uint64_t chunk_offset = 0;
    std::vector<iovec> iov;
};
static_assert(std::is_standard_layout_v<Request>, "Request::of needs &context == this");

// Data no receive asked for. rxm keeps every message that matches no posted receive in a queue
// of its own, without a bound; our data tags are taken only by the receive a clear-to-send
// named, so data waiting there was never asked for (or its receive was cancelled). Rounds of
// peeks drop it: one per interval while they find nothing, one per pass while they do
// (doc/methods/ofi.md, "Unasked data").
class UnaskedSweep {
public:
    using Clock = kit::Deadlines::Clock;
    static constexpr Clock::duration interval = std::chrono::milliseconds(1);
    static constexpr int most_per_round = 4096;

    UnaskedSweep() { request_.role = Request::Role::sweep; }
    // Starts a round if none runs and one is due: true if it posted a peek.
    bool start(Fabric& fabric, Clock::time_point now) {
        if (running_ || now < due_) return false;
        due_ = now + interval;
        round_ = 0;
        return post(fabric);
    }
    // The peek's completion: one message dropped; the next peek is posted.
    void on_found(Fabric& fabric);
    // The peek's error completion (-FI_ENOMSG: nothing waits): the round is over. One that
    // dropped anything may be under a flood: the next is due at once.
    void on_end() {
        running_ = false;
        if (round_ > 0) due_ = {};
    }
    bool running() const { return running_; }
    std::uint64_t dropped() const { return dropped_; }

private:
    bool post(Fabric& fabric);
    Request request_;
    bool running_ = false;
    int round_ = 0;
    Clock::time_point due_{};
    std::uint64_t dropped_ = 0;
};

// What the method keeps in an Operation (method_slots).
struct OpSlots {
    // A receive with a grant out is `granted` (still among the peer's posted receives); one an
    // eager or RTS message matched meanwhile is `withdrawing` until its grant's receive is
    // cancelled; one the user cancelled is `revoking` until the sender answers.
    enum Phase : std::uint8_t {
        none,
        held,
        in_flight,
        announced,
        moving,
        posted,
        granted,
        withdrawing,
        revoking
    };
    std::uint32_t transfer = 0;  // the transfer or grant id
    std::uint32_t pending = 0;   // libfabric operations of this op not yet completed
    std::int32_t error = 0;      // what the op ends with once pending is 0
    Phase phase = none;
    bool counted = false;  // in OfiMethod::in_flight_.ops_waiting
    // announced: when its CTS is late; revoking: when the sender's answer is.
    kit::Deadlines::Clock::time_point answer_due{};
};

// The sizes an instance sends and receives in: the settings', and what the provider took at
// open.
struct Sizes {
    bmi_size_t unexpected_limit = 0;
    std::size_t eager_bytes = 0;
    std::size_t chunk_bytes = 0;
    std::size_t buffer_count = 0;
    // A receive buffer: the larger of the eager and unexpected sizes, with room for a record's
    // trailer whether or not a peer encrypts.
    std::size_t buffer_bytes = 0;
    std::size_t inject_bytes = 0;
    // The most iovecs one tagged operation takes both ways (1 where memory must be registered:
    // a registration per iovec would cost more than the copy).
    std::size_t iov_limit = 1;
};

// The settings that turn a behaviour on or off.
struct Switches {
    // ofi_shm_sweep: remove_regions_of_dead_clients at open, and on an ofi+shm server every
    // limits_.shm_sweep (the deadline sweep_key).
    bool sweep_dead_clients = true;
    bool grants = true;           // ofi_grants
    bool wait_descriptor = true;  // ofi_wait_descriptor
};

// Address-vector entries of peers we forgot, kept while something may still use them.
struct ForgottenEntries {
    // Entries that requests in the provider still name.
    std::vector<fi_addr_t> retiring;
    // Entries that no request names any more, kept for a while (oldest first, at most
    // most_lingering): removing one closes the connection beneath (rxm with
    // FI_AV_REMOVE_CLEANUP), and the peer's next message, often its hello, would be lost on it.
    std::deque<fi_addr_t> lingering;
    // shm: entries of endpoints that may still send. libfabric 1.17's shm names a message's
    // source by an index the sender's command carries, and once an entry is removed it reports
    // what that endpoint still sends as another peer's; kept, its messages name its own entry,
    // which no peer holds, and are dropped. Removed once the endpoint is gone
    // (release_silenced).
    std::vector<fi_addr_t> silenced;
};

// Large messages under way beyond their operations: RTSs waiting for a CTS, receives whose
// grants are being withdrawn or revoked, and the next transfer's number.
struct LargeTransfers {
    std::unordered_map<std::uint32_t, Operation*> awaiting_cts;
    std::unordered_map<Operation*, Arrival> withdrawn;       // withdrawing receives' arrivals
    std::unordered_map<std::uint32_t, Operation*> revoking;  // revoking receives, by grant id
    std::uint32_t next_transfer = 1;
};

// Encrypted sends: large messages' staging by op, buffers kept for the next ones, and pieces
// not yet sealed or posted, in order (seal_next). One whose op has been let go of (fail_peer)
// is released unposted: its staging is gone.
struct SealedSends {
    std::unordered_map<const Operation*, Staged> staged;
    StagingBuffers spare;
    std::deque<Request*> unsealed;
    std::vector<std::uint8_t> inject_record;  // an injected message's record
};

// shm: the region locks libfabric 1.17 takes without a bound (ofi_region_locks.cpp): the look
// at our own (null elsewhere) and since when it has been held, and the peers found ended
// holding theirs, lost at the next pass (lose_dead_holders).
struct RegionLocks {
    std::unique_ptr<ShmRegionLock> own;
    std::optional<std::chrono::steady_clock::time_point> own_held_since;
    std::vector<fi_addr_t> dead_holders_found;
};

// The provider an instance opened, and whether it is libfabric's shm, which the method asks
// often: shm has region files to watch and no wait descriptor.
struct OpenedProvider {
    std::string name;  // "" until open()
    bool shm = false;
};

// What every open of the provider asks for.
struct OpenRules {
    // The instance's allocated ofi planes (doc/planes.md); none: any provider.
    std::vector<support::planes::PlaneBinding> planes;
    std::vector<std::byte> auth_key;  // ofi_auth_key: asked of the provider with every open
};

// Posts the provider said -FI_EAGAIN to, and when they are tried again.
struct Backlog {
    // In order per peer (buffers under FI_ADDR_UNSPEC): a peer that takes nothing holds up no
    // other.
    std::unordered_map<fi_addr_t, std::deque<Request*>> by_peer;
    RetryPause pause;  // when by_peer tries the provider again
};

// What peers' arrivals hold of our receive buffers and memory.
struct HeldArrivals {
    // Buffers holding a message until the early budget or the unexpected quota has room, in
    // arrival order; a peer's later messages wait behind its first.
    std::deque<Request*> parked;
    EarlyBudget early;
    // Buffers posted in place of parked ones, so that peers which park cannot take every
    // buffer from the others; charged to early's total (ofi_early_total_bytes), one each.
    EarlyBudget::Account spares;
};

// Keyed hellos not yet proven, by host, and how many tickets that is over every host.
struct UnprovenPeers {
    kit::SourceAdmission admission;
    std::size_t tickets = 0;
};

// What is under way, counted where it starts and ends: the wait policy reads it.
struct InFlight {
    std::size_t ops_waiting = 0;    // posted operations not yet finished
    std::size_t data_requests = 0;  // a large message's chunks in the provider
    std::uint32_t resets_out = 0;   // resets to strangers in the provider
};

class OfiMethod final : public Method {
public:
    OfiMethod(const Config& config, Sink& sink);
    ~OfiMethod() override;
    // The key, and a server's fabric; 0 or -BMI_E*.
    int start(const Config& config);
    // Opens the fabric of `address`'s provider and posts the receive buffers: a server's at
    // creation, a client's at its first lookup. One provider per instance. 0 or -BMI_E*.
    int open(const OfiAddress& address, bool listen);

    std::string_view name() const override { return "bmi_ofi"; }
    std::string_view scheme() const override { return "ofi"; }
    int lookup(std::string_view address, std::shared_ptr<Peer>& out) override;
    int lookup_prepared(std::string_view address, const LookupHint& hint,
                        std::shared_ptr<Peer>& out) override;
    int post(Operation& op) override;
    int send_now(Peer& peer, OpKind kind, bmi_msg_tag_t tag,
                 std::span<const Segment> segments) override;
    void progress() override;
    int wait_fd() const override { return epoll_fd_; }
    bool before_sleep() override;
    void after_wake() override { waiting_.after_wake(); }
    bool accept_wake_fd(int fd, std::uint64_t tag) override;
    void progress_events(std::span<const epoll_event> ready) override;
    void cancel(Operation& op) override;
    void forget_peer(Peer& peer) override;
    bool peer_gone(const Peer& peer) const override;
    std::string describe_peer(const Peer& peer) const override;
    std::string peer_host(const Peer& peer) const override;
    int query_range(const Peer& peer, std::string_view id_string, int netmask) const override;
    bool native_lists() const override { return true; }
    bmi_size_t unexpected_limit() const override { return sizes_.unexpected_limit; }
    bmi_size_t max_message_size() const override;
    std::string listen_address() const override { return listen_address_; }
    void* mem_alloc(bmi_size_t size) override;
    bool mem_free(void* buffer) override;
    int set_info(Peer* peer, int option, void* arg) override;
    int get_info(Peer* peer, int option, void* arg) override;

private:
    // ofi_method.cpp
    std::shared_ptr<OfiPeer> peer_at(fi_addr_t addr) const;
    std::string address_of_name(const std::vector<std::byte>& name) const;
    void finish(Operation& op, int error);
    // shm: the peer's endpoint was this process's and has closed (ofi_shm.hpp); nothing may
    // be sent to it.
    bool closed_in_process(OfiPeer& peer) const;
    bool closed_in_process(fi_addr_t addr) const;
    // shm: 0 if a send to the peer may enter the provider now (ShmRegionLock); -FI_EAGAIN while
    // a live process holds its region's lock; -FI_ECONNRESET once the region's owner died
    // with the lock held, and the peer is lost at the next pass (lose_dead_holders).
    int region_admits(OfiPeer& peer);
    int region_admits(fi_addr_t addr);
    // shm: whether our own region's lock is free, so that a read of the queue or a posted
    // receive, which take it in the provider, may call in; taken back from a holder that ended.
    bool own_region_free();
    bool ended_holder_seen() const;
    void lose_dead_holders();
    // The address-vector entry of the endpoint `name`, whose text is `endpoint`
    // (address_of_name; AddressTable): FI_ADDR_NOTAVAIL if the provider takes no more.
    fi_addr_t enter_address(const std::vector<std::byte>& name, const std::string& endpoint);
    // Whether a request of ours in the provider (or waiting to enter it) names addr's entry.
    bool named_by_requests(fi_addr_t addr) const;
    // Forgets the peer at addr, with its handshake, ticket, deadlines and parked messages, and
    // removes its entry once no request in the provider names it.
    void erase_peer(fi_addr_t addr);
    // A request toward addr ended: its entry goes if it was waiting for that.
    void retire_if_unused(fi_addr_t addr);
    // shm: removes the kept entries (forgotten_.silenced) of endpoints that can no longer send.
    void release_silenced();

    // ofi_send.cpp
    int post_send(Operation& op, OfiPeer& peer);
    void start_send(Operation& op, OfiPeer& peer);
    // The largest eager and unexpected messages we send peer: ours, within what it takes.
    std::size_t eager_limit_to(const OfiPeer& peer) const {
        return std::min(sizes_.eager_bytes, peer.eager_takes);
    }
    std::size_t unexpected_limit_to(const OfiPeer& peer) const {
        return std::min(static_cast<std::size_t>(sizes_.unexpected_limit), peer.unexpected_takes);
    }
    bool above_unexpected_limit(OpKind kind, std::size_t size, const OfiPeer& peer) const {
        return kind == OpKind::send_unexpected && size > unexpected_limit_to(peer);
    }
    // What our receive buffers take, as our hello and answer tell each peer.
    BufferLimits buffer_limits() const;
    static void note_limits(OfiPeer& peer, const std::optional<BufferLimits>& limits);
    void greet(OfiPeer& peer);
    void flush_waiting(OfiPeer& peer, int error);
    void send_control(OfiPeer& peer, Kind kind, std::uint32_t bmi_tag, const void* body,
                      std::size_t size);
    void on_cts(OfiPeer& peer, const Cts& cts);
    // Credits and grants: a handshake starts both directions afresh; what a message of ours
    // gives back (all it may of what we owe) and, once it left, the owing settled; what the
    // peer gave.
    void restart_flow(OfiPeer& peer);
    // The number our bye to the peer carries as we close.
    std::uint8_t bye_number(const OfiPeer& peer) const;
    static std::uint32_t credits_to_give(const OfiPeer& peer) {
        return std::min(peer.owed, most_credits_per_message);
    }
    static void gave(OfiPeer& peer, std::uint32_t credits);
    // An eager or unexpected message the provider copies before returning, costing one of our
    // credits and carrying those we owe peer (given back only if it went).
    ssize_t inject_costly(OfiPeer& peer, const void* data, std::size_t size, std::uint64_t tag);
    // tag with the credits we owe peer, taken as given back, and with its number if its kind
    // is numbered: for a message about to be posted.
    static std::uint64_t giving_credits(OfiPeer& peer, std::uint64_t tag);
    // tag with `back` credits and, if its kind is numbered, the peer's next number; and that
    // stamp taken as used once the message goes.
    static std::uint64_t stamped(const OfiPeer& peer, std::uint64_t tag, std::uint32_t back);
    static void stamp_used(OfiPeer& peer, std::uint64_t tag, std::uint32_t back);
    void on_credits(OfiPeer& peer, std::uint32_t credits);
    // Grants, the sender's side: an expected message sent (one under the tag's grant uses it,
    // any other makes it void); a grant or a revoke of the peer's.
    bool send_under_grant(Operation& op, OfiPeer& peer);
    static void sent_expected(OfiPeer& peer, bmi_msg_tag_t tag);
    void on_grant(OfiPeer& peer, bmi_msg_tag_t tag, const Grant& grant);
    void on_revoke(OfiPeer& peer, const GrantId& revoke);
    // A large message's data as tagged operations of at most piece_bytes each (of
    // stated_piece, the sender's Rts's, if not 0 and not sealed), under data_tag(transfer) or,
    // for `grant_recv` or under a grant, in one operation under grant_tag(transfer).
    void post_chunks(Operation& op, OfiPeer& peer, Request::Role role, std::uint32_t transfer,
                     std::size_t size, bool granted = false, std::size_t stated_piece = 0);
    // What a large message's data moves in: sealed pieces (staged), or chunks of
    // sizes_.chunk_bytes.
    std::size_t piece_bytes(const Staged* staged) const {
        return staged != nullptr ? sealed_piece_bytes : sizes_.chunk_bytes;
    }
    // Points a chunk at [offset, offset + length) of its op's segments: their memory where one
    // segment holds it, iovecs where the provider takes that many, else a bounce buffer.
    void place_chunk(Request& request, Staged* staged, std::uint64_t offset,
                     std::size_t length) const;
    // An eager send's bytes: the op's one buffer, or its list gathered into `gathered`.
    static const void* eager_bytes(const Operation& op, std::vector<std::byte>& gathered);

    // ofi_recv.cpp
    int post_recv(Operation& op, OfiPeer& peer);
    // Grants, the receiver's side (ofi_grants.cpp): a receive just posted told to its sender;
    // an eager or RTS message that matched a granted receive, taken once the grant's receive
    // is cancelled; a granted receive cancelled by the user, and the sender's answer.
    void offer_grant(Operation& op, OfiPeer& peer);
    void withdraw_grant(Operation& op, Arrival arrival);
    void revoke_grant(Operation& op, OfiPeer& peer);
    void on_unused(OfiPeer& peer, const GrantId& unused);
    void on_grant_recv_end(Request& request, int error, std::size_t length);
    // Whether a receive of the peer's for tag waits to learn if its grant was used; the tag's
    // arrivals kept meanwhile, matched to the receives posted since.
    bool withdrawing(const OfiPeer& peer, bmi_msg_tag_t tag) const;
    void match_kept(OfiPeer& peer, bmi_msg_tag_t tag);
    // A posted receive ended by its peer's going: at once, or once its grant's receive is.
    void end_posted_recv(Operation& op, int error);
    void fail_unanswered_revokes(OfiPeer& peer, kit::Deadlines::Clock::time_point now);
    // An eager arrival's bytes are `body`: its own copy, or the receive buffer it is in.
    void take_arrival(Operation& op, OfiPeer& peer, const Arrival& arrival,
                      std::span<const std::byte> body);
    void on_message(Request& buffer, fi_addr_t source);
    // Whether a filled buffer carries `peer`'s token (Fabric::token), where messages carry one.
    bool carries_token(const Request& buffer, OfiPeer& peer);
    // A costly message of the peer's took its buffer: false if it had no credit for it.
    static bool admit_costly(OfiPeer& peer);
    // One of them left its buffer: owed back, sent back alone once half of them are.
    void took(OfiPeer& peer);

    // ofi_records.cpp: encryption once a handshake chose a cipher (doc/security.md, "ofi").
    // Every message after the handshake's is a record; a large message's data is sealed apart
    // into a staging buffer on both sides, under a key named by its Rts's record number.
    void start_records(OfiPeer& peer, kit::KeyHandshake& handshake, bool initiator);
    static bool sealed_kind(Kind kind) {
        return kind != Kind::hello && kind != Kind::answer && kind != Kind::proof;
    }
    static std::size_t record_overhead(const OfiPeer& peer) {
        return peer.records ? support::keys::NumberedRecords::trailer_size : 0;
    }
    // A message about to be posted (its tag final), sealed into its own bytes.
    static void seal_request(OfiPeer& peer, Request& request);
    // fi_inject of a message, sealed first where the peer's traffic is encrypted.
    ssize_t inject_sealed(OfiPeer& peer, const void* data, std::size_t size, std::uint64_t tag);
    // Opens a filled buffer's record in place: false (and the peer lost) if it fails.
    bool open_record(Request& buffer, OfiPeer& peer);
    // A large message's staging where the peer is encrypted (Staged): under the key its Rts's
    // record number names, for our data (send) or the peer's (receive); the size its pieces
    // move (the plain size where the peer is not encrypted).
    std::size_t stage_send(Operation& op, OfiPeer& peer, std::uint64_t record);
    std::size_t stage_recv(Operation& op, OfiPeer& peer, std::uint64_t record);
    std::size_t stage(const Operation& op, support::keys::Cipher cipher,
                      const support::keys::DirectionKey& key, std::uint64_t record,
                      std::uint64_t total);
    Staged* staged_of(const Operation& op);
    void unstage(const Operation& op);
    // Seals the chunks of [offset, offset + length) of the staging from the op's segments.
    static void seal_piece(Staged& staged, const Operation& op, std::uint64_t offset,
                           std::size_t length);
    // Seals and posts the oldest piece of sealed_.unsealed whose op still waits for it; true if
    // any.
    bool seal_next();
    // A data receive of a staged op has come (`length` bytes): its chunks opened into the op's
    // segments; false if one failed (the op's error is then -BMI_EPROTO, and the caller drops
    // the peer, as for a failed record).
    bool open_piece(Request& request, std::size_t length);

    // ofi_keys.cpp
    void on_hello(Request& buffer);
    void on_answer(OfiPeer& peer, std::span<const std::byte> body);
    void on_proof(OfiPeer& peer, std::span<const std::byte> body);
    void refuse(const std::shared_ptr<OfiPeer>& peer, kit::Refusal why);

    bool deliver_unexpected(Request& buffer, OfiPeer& peer);
    void on_abort(OfiPeer& peer, const Abort& abort);
    void depart(OfiPeer& peer);
    // Fails everything the peer holds of ours with `error` and forgets what it sent.
    void fail_peer(OfiPeer& peer, int error);
    // An eager, RTS or unexpected message taken out of its buffer: false if it must wait
    // there (the early budget or the unexpected quota is full).
    bool take_message(Request& buffer, OfiPeer& peer, Kind kind);
    // An ordered message (ofi_order.hpp): taken in its turn, with those that came early behind
    // it, or kept in its buffer until its turn.
    void on_ordered(Request& buffer, OfiPeer& peer, Kind kind);
    // One in its turn: true if its buffer stays (parked).
    bool take_in_turn(Request& buffer, OfiPeer& peer, Kind kind, bool spare_posted);
    void wait_for_turn(Request& buffer, OfiPeer& peer);
    // The peer's early messages let go (it is gone, or shook hands again).
    void drop_waiting(OfiPeer& peer);
    // spare_posted: a spare already stands in for the buffer (it waited for its turn).
    void park(Request& buffer, OfiPeer& peer, bool spare_posted = false);
    // A receive buffer posted in place of one kept, within the early budget's total.
    void post_spare();
    void drop_parked(fi_addr_t addr);
    // A parked buffer is free again: reposted, or let go if a spare stood in for it.
    void unpark(Request& buffer);
    void release_early(OfiPeer& peer, const Arrival& arrival);

    // ofi_deadlines.cpp
    void load_limits(const Config& config);
    void on_deadline(kit::DeadlineKey key, kit::Deadlines::Clock::time_point now);
    // The deadlines due, if the timer can have gone off by `now`; true if any was.
    bool run_deadlines(kit::Deadlines::Clock::time_point now);
    // A peer past a deadline: taken as gone, as after a bye.
    void lose(OfiPeer& peer, int error = -BMI_ETIMEDOUT);
    // The silence deadline: started when a receive waits on a ready peer, or a client of ours
    // is ready; after half the bound unheard it sends a ping. A peer we wait on that answers
    // none by the bound is lost; an idle client is asked again, less and less often.
    void watch_silence(OfiPeer& peer);
    void on_silence(OfiPeer& peer, kit::DeadlineKey key, kit::Deadlines::Clock::time_point now);
    std::chrono::milliseconds silence_interval(const OfiPeer& peer) const;
    // A ping the provider could not deliver: the peer's process (or node) is gone.
    void on_failed_ping(fi_addr_t addr, int error);
    // shm: clients whose endpoints can no longer send (ended without a bye, their regions
    // swept) are lost: a ping to one lands in its region and never fails.
    void lose_ended_shm_clients();

    // ofi_restart.cpp: a peer we looked up that restarted (ofi_handshake.hpp's Probe). A wait
    // on it that hears nothing for probe_after, and each ping to it, sends a probe; a peer that
    // knows neither the probe's sender nor its name answers with a reset, which fails what
    // waits on it at once, as a reset connection does.
    void send_probe(OfiPeer& peer);
    // A probe or reset: neither sealed nor carrying credits or a number, since the peer that
    // answers shares no keys with the prober.
    Request& unsealed_request(fi_addr_t addr, Kind kind, std::vector<std::byte> body);
    // A wait on a peer we looked up that is silent this long sends a probe of its own, well
    // before the first ping: a server that knows us only looks it up, a restarted one answers.
    std::chrono::milliseconds probe_after() const {
        return std::min(limits_.silence / 4, std::chrono::milliseconds(1000));
    }
    void on_probe_due(OfiPeer& peer, kit::DeadlineKey key, kit::Deadlines::Clock::time_point now);
    void on_probe(std::span<const std::byte> body, fi_addr_t source);
    // shm: whether the peer we greeted has left the region its entry reaches: a new process's
    // file is under its name, or the process that made the region has ended. If so, it is
    // lost with -BMI_ECONNRESET.
    bool left_its_region(OfiPeer& peer);
    // shm: before a hello, a new entry for a peer whose name has a new region file (above),
    // unless requests in the provider still name the old one. False if the provider took no
    // new entry: the peer has none, and what is sent to it fails with -BMI_ENOMEM.
    bool enter_new_region(OfiPeer& peer);
    void on_reset(std::span<const std::byte> body, fi_addr_t source);
    // A send or stall clock's wake-up: the peer is lost if it owes progress and made none.
    void lose_if_late(OfiPeer& peer, kit::ProgressDeadline& clock, bool owed, std::uint64_t count,
                      kit::DeadlineKey key, kit::Deadlines::Clock::time_point now,
                      std::chrono::milliseconds limit, const char* what);
    void late_handshake(OfiPeer& peer);
    void fail_unanswered_rts(OfiPeer& peer, kit::Deadlines::Clock::time_point now);
    // A keyed hello of a new peer, admitted within the bounds on unproven ones (its host's
    // oldest is dropped to make room); false if all hosts together hold their bound.
    bool admit_hello(OfiPeer& peer);
    void release_ticket(fi_addr_t addr);
    // An unproven peer given up: forgotten with its address-vector entry.
    void drop_unproven(const std::shared_ptr<OfiPeer>& peer);
    // A request toward a peer enters or leaves its sends_out / data_recvs_out.
    void track(Request& request);
    void untrack(Request& request);

    // ofi_progress.cpp
    Request& new_request(Request::Role role, Operation* op);
    void submit(Request& request);
    int try_post(Request& request);
    void repost_buffer(Request& buffer);
    // Posts the backlog again once its pause has run out, or at once when `completions` were
    // just read (a full queue has room again); true if it posted anything.
    bool drain_backlog(kit::Deadlines::Clock::time_point now, bool completions);
    bool backlog_empty(fi_addr_t addr) const;
    // The descriptor (and own registration) of r's memory, where the provider needs them.
    int register_memory(Request& r);
    bool retry_parked();
    bool read_completions();
    // Drops data no receive asked for where the provider keeps it (UnaskedSweep), a round
    // when one is due by `now`; true if it dropped any.
    bool sweep_unasked(kit::Deadlines::Clock::time_point now);
    void cancel_data_recvs(const Operation& op);
    void on_completion(Request& request, const fi_cq_tagged_entry& entry, fi_addr_t source);
    void on_error(Request& request, int error);
    void end_request(Request& request, int error);
    void release(Request& request);

    // ofi_method.cpp: the fabric an open may use under an allocation; 0 or
    // -BMI_EADDRNOTAVAIL when the address's provider is on none of the planes.
    int allocated_choice(const OfiAddress& address, FabricChoice& out) const;

    Sink& sink_;
    CompletionRouter router_;
    OpenRules open_rules_;
    OpenedProvider provider_;
    // Our endpoint's address as peers name it (address_of_name of fabric_.name()); on shm it is
    // listed in ofi_shm.hpp while the endpoint is open.
    std::string own_endpoint_;
    // shm server: the claim on its name; declared before fabric_, so released after it.
    ShmNameClaim shm_claim_;
    kit::KeyGate gate_{"bmi_ofi"};
    int epoll_fd_ = -1;
    // What each descriptor in epoll_fd_ carries: the provider's wait descriptor, our deadline
    // timer, or the nap timer (a provider without a wait descriptor).
    static constexpr std::uint64_t provider_tag = 0, timers_tag = 1, naps_tag = 2;
    std::string listen_address_;
    Sizes sizes_;
    const Switches switches_;
    static constexpr kit::DeadlineKey sweep_key{FI_ADDR_UNSPEC, kit::DeadlineKind::sweep};
    std::unordered_map<fi_addr_t, std::shared_ptr<OfiPeer>> peers_;
    AddressTable addresses_;  // the provider's entries: peers_'s and forgotten_'s
    ForgottenEntries forgotten_;
    // Handshakes under way, by peer: the method's, not the peer's, since a peer may outlive
    // the method and a handshake holds a nonce of gate_.
    std::unordered_map<fi_addr_t, kit::KeyHandshake> handshakes_;
    std::unordered_map<Request*, std::unique_ptr<Request>> requests_;
    Backlog backlog_;
    Limits limits_;
    HeldArrivals held_;
    UnprovenPeers unproven_;
    kit::Deadlines timers_;  // setup, send, stall and rendezvous, by fi_addr
    LargeTransfers large_;
    SealedSends sealed_;
    // The counters of Stats, counted as things happen; get_info adds what it reads off the
    // state at the time.
    Stats counted_;
    RegionLocks region_locks_;
    // Completions read for anything but the unasked sweep's peeks (sweep_unasked).
    std::uint64_t completions_taken_ = 0;
    std::vector<std::byte> gather_;  // a list send_now copies into one buffer for the provider
    Waiting waiting_;                // spins, then naps or sleeps on the descriptor
    InFlight in_flight_;
    Registrations registrations_;  // where the provider needs local registration
    UnaskedSweep sweep_;
    // Last, so it closes first: closing the endpoint ends every operation in it, and only then
    // may the requests' memory go.
    Fabric fabric_;
};

}  // namespace bmi::method::ofi
