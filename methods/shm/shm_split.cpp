// SPDX-License-Identifier: LGPL-2.1-or-later
// Split copies (the protocol is described in shm_split.hpp): the receiver's side (start,
// claim and read, wait for the sender's share, finish or fall back) and the sender's side
// (answer HELP, claim and write).
#include "methods/shm/shm_split.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <poll.h>

#include "methods/shm/shm_copy.hpp"
#include "methods/shm/shm_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// Bytes one side copies per progress step, so a call into the method stays short.
constexpr std::size_t step_bytes = std::size_t{1} << 20;
// How long closing a connection waits for a live sender to finish the chunks it claimed.
constexpr auto quiesce_limit = std::chrono::milliseconds(500);

// Half the message, 16-256 KiB, whole pages: two chunks let both sides start at once on a
// small message; more, smaller chunks on a large one let the faster side take more of them,
// and a system call per 256 KiB costs nothing that shows.
// Through mapped memory (shm_region.hpp) a chunk costs no system call, only a claim, so
// chunks are a sixteenth of the message up to 128 KiB: the side that finishes first waits
// at most for the other's last small chunk (other caps: doc/perf/code-figures.md).
std::uint64_t chunk_size_for(bmi_size_t size, bool mapped) {
    auto bytes = static_cast<std::uint64_t>(size);
    std::uint64_t chunk = mapped ? std::clamp<std::uint64_t>(bytes / 16, 16u << 10, 128u << 10)
                                 : std::clamp<std::uint64_t>(bytes / 2, 16u << 10, 256u << 10);
    return chunk & ~std::uint64_t{4095};
}

bool refused(int error) { return error == -EPERM || error == -EACCES || error == -ENOSYS; }

// The peer's end of the socket is gone (its process exited): it writes nothing any more.
bool socket_hung_up(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    return fd < 0 || (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)));
}
}  // namespace

bool ShmMethod::start_split(Connection& conn, Operation& op, bmi_size_t size, std::uint64_t cookie,
                            std::vector<RemoteIov>& source, std::uint64_t started_ns,
                            std::vector<Segment>& mapped, PeerRegions::Keep& keep) {
    // Through the kernel a split needs both our permission to read the sender and the
    // sender's to help; from a mapped buffer we can always copy it all ourselves.
    bool kernel_ok = options_.split_copy != SplitMode::never && single_copy_;
    if ((!kernel_ok && mapped.empty()) || source.empty() || conn.board_free == 0 ||
        conn.state != ConnState::open)
        return false;
    const auto limit = static_cast<std::size_t>(eager_limit(conn));
    std::size_t room = limit > sizeof(HelpInfo) ? (limit - sizeof(HelpInfo)) / sizeof(RemoteIov)
                                                : 0;
    std::vector<RemoteIov> target(static_cast<std::size_t>(nonempty_segments(segments_of(op))));
    if (target.empty() || target.size() > room) return false;
    describe_segments(segments_of(op), target);

    auto entry = static_cast<std::uint32_t>(std::countr_zero(conn.board_free));
    conn.board_free &= ~(1u << entry);
    std::uint32_t generation = ++conn.board_generation[entry];
    if (generation == 0) generation = ++conn.board_generation[entry];
    SplitBoardEntry& shared = conn.own_board[entry];
    shared.pushed.store(0, std::memory_order_relaxed);
    shared.push_failed.store(0, std::memory_order_relaxed);
    shared.claims.store(std::uint64_t{generation} << 32, std::memory_order_release);

    SplitReceive split;
    split.op = &op;
    split.cookie = cookie;
    split.source = std::move(source);
    split.size = size;
    split.started_ns = started_ns;
    split.mapped_source = std::move(mapped);
    split.keep = std::move(keep);
    split.entry = entry;
    split.generation = generation;
    split.chunk_size = chunk_size_for(size, !split.mapped_source.empty());
    split.chunks = static_cast<std::uint32_t>(
        (static_cast<std::uint64_t>(size) + split.chunk_size - 1) / split.chunk_size);

    buffers_.offer(conn, segments_of(op));  // before the HELP that names our buffer
    HelpInfo info{entry, generation, split.chunk_size, split.chunks, 0};
    Control help{MsgType::help, cookie, 0, static_cast<std::int32_t>(target.size())};
    help.payload.resize(sizeof info + target.size() * sizeof(RemoteIov));
    std::memcpy(help.payload.data(), &info, sizeof info);
    std::memcpy(help.payload.data() + sizeof info, target.data(),
                target.size() * sizeof(RemoteIov));
    conn.controls.push_back(std::move(help));
    conn.splits.push_back(std::move(split));
    return true;
}

int ShmMethod::advance_splits(Connection& conn, bool& moved) {
    for (std::size_t i = 0; i < conn.splits.size();) {
        SplitReceive& split = conn.splits[i];
        SplitBoardEntry& shared = conn.own_board[split.entry];
        Operation& op = *split.op;
        std::size_t copied = 0;
        int error = 0;
        while (!split.claims_done && copied < step_bytes) {
            std::uint32_t chunk = 0;
            if (!claim_chunk(shared, split.generation, split.chunks, chunk)) {
                split.claims_done = true;
                split.sender_share = split.chunks - split.own;
                break;
            }
            ++split.own;
            std::uint64_t offset = std::uint64_t{chunk} * split.chunk_size;
            auto length = static_cast<std::size_t>(std::min<std::uint64_t>(
                split.chunk_size, static_cast<std::uint64_t>(split.size) - offset));
            error = copy_chunk(Direction::read, conn.peer_pid, split.source, split.mapped_source,
                               segments_of(op), offset, length);
            if (error != 0) break;
            copied += length;
            moved = true;
        }
        if (error == -ESRCH) return -BMI_ECONNRESET;  // the sender is gone: close fails it
        if (error != 0) {
            // We cannot read the sender's memory. Stop the sender writing into ours first,
            // then let the sender stream the message (refused) or fail both ends (bad memory).
            wait_for_sender(conn, split);
            conn.board_free |= 1u << split.entry;
            std::uint64_t cookie = split.cookie;
            conn.splits.erase(conn.splits.begin() + static_cast<std::ptrdiff_t>(i));
            moved = true;
            if (refused(error)) {
                BMI_LOG(shm, "process_vm_readv refused (%s): large messages use two copies",
                        std::strerror(-error));
                single_copy_ = false;
                op.transferred = 0;
                conn.receives.emplace(cookie, StreamReceive{&op, 0});
                conn.controls.push_back(Control{MsgType::cts, cookie, 0, 0});
            } else {
                BMI_LOG(error, "shm: reading the sender's buffer failed: %s",
                        std::strerror(-error));
                int code = support::bmi_error_from_errno(-error);
                ops_.finish(op, code);
                conn.controls.push_back(Control{MsgType::nak, cookie, 0, code});
            }
            continue;
        }
        if (!split.claims_done) {
            ++i;
            continue;
        }
        bool failed = shared.push_failed.load(std::memory_order_acquire) != 0;
        if (!failed && shared.pushed.load(std::memory_order_acquire) < split.sender_share) {
            ++i;  // the sender still writes its share
            continue;
        }
        // Every chunk is in (or the sender gave up, and wrote nothing after saying so).
        conn.board_free |= 1u << split.entry;
        SplitReceive done = std::move(split);
        conn.splits.erase(conn.splits.begin() + static_cast<std::ptrdiff_t>(i));
        moved = true;
        if (done.cancelled) {
            ops_.finish(op, -BMI_ECANCEL);
            conn.controls.push_back(Control{MsgType::nak, done.cookie, 0, -BMI_ECANCEL});
        } else if (failed) {
            // Read it all ourselves; the chunks the sender did write are simply read again.
            op.transferred = 0;
            conn.pulls.push_back(Pull{&op, done.cookie, std::move(done.source), done.size});
        } else {
            op.actual_size = done.size;
            timed(LargePath::split, done.size, done.started_ns);
            ops_.finish(op, 0);
            conn.controls.push_back(Control{MsgType::done, done.cookie, 0, 0});
        }
    }
    return 0;
}

void ShmMethod::close_split_claims(Connection& conn, SplitReceive& split) {
    if (split.claims_done) return;
    std::uint32_t taken = close_claims(conn.own_board[split.entry], split.generation, split.chunks);
    split.claims_done = true;
    split.sender_share = taken - split.own;
}

void ShmMethod::wait_for_sender(Connection& conn, SplitReceive& split) {
    close_split_claims(conn, split);
    const SplitBoardEntry& shared = conn.own_board[split.entry];
    auto deadline = std::chrono::steady_clock::now() + quiesce_limit;
    while (shared.push_failed.load(std::memory_order_acquire) == 0 &&
           shared.pushed.load(std::memory_order_acquire) < split.sender_share) {
        if (socket_hung_up(conn.fd)) return;
        if (std::chrono::steady_clock::now() > deadline) {
            BMI_LOG(error, "shm: peer pid %d still holds chunks of an ended receive",
                    static_cast<int>(conn.peer_pid));
            buffers_.retire(*split.op);
            return;
        }
        std::this_thread::yield();
    }
}

bool ShmMethod::cancel_split(Connection& conn, Operation& op) {
    for (auto& split : conn.splits) {
        if (split.op != &op) continue;
        // Nothing more for the sender to claim; the receive ends once its claimed chunks are
        // written (advance_splits), so nothing lands in the buffer after the cancel.
        close_split_claims(conn, split);
        split.cancelled = true;
        BMI_LOG(shm, "cancel of a split receive: %u of %u chunks are the sender's to finish",
                split.sender_share, split.chunks);
        wake_self();
        return true;
    }
    return false;
}

void ShmMethod::end_splits(Connection& conn, int error) {
    for (auto& split : conn.splits) {
        wait_for_sender(conn, split);
        ops_.finish(*split.op, error);
    }
    conn.splits.clear();
    conn.pushes.clear();
}

// --- the sending side ---

int ShmMethod::on_help(Connection& conn, Operation& op, const MsgHeader& header) {
    HelpInfo info{};
    Window window = conn.rx.peek(header.slots);
    window.read(header_size, &info, sizeof info);
    auto total = static_cast<std::uint64_t>(op.total_size);
    // The chunks must cover exactly our message (no products: they could overflow).
    bool sane = info.entry < split_board_entries && info.chunk_size > 0 && header.aux > 0 &&
                info.chunks == total / info.chunk_size + (total % info.chunk_size != 0);
    if (!sane) return -BMI_EPROTO;
    if (options_.split_copy == SplitMode::never) return 0;  // the receiver copies it all
    SplitPush push;
    push.op = &op;
    push.entry = info.entry;
    push.generation = info.generation;
    push.chunk_size = info.chunk_size;
    push.chunks = info.chunks;
    push.target.resize(static_cast<std::size_t>(header.aux));
    window.read(header_size + sizeof info, push.target.data(),
                push.target.size() * sizeof(RemoteIov));
    // The receiver offered its buffer before this HELP, if it could share it.
    buffers_.take_offers(conn);
    conn.peer_regions.translate(push.target, push.mapped_target, push.keep);
    if (push.mapped_target.empty() && !single_copy_) return 0;
    conn.pushes.push_back(std::move(push));
    return 0;
}

void ShmMethod::advance_pushes(Connection& conn, bool& moved) {
    bool wrote = false;
    for (std::size_t i = 0; i < conn.pushes.size();) {
        SplitPush& push = conn.pushes[i];
        SplitBoardEntry& shared = conn.peer_board[push.entry];
        auto total = static_cast<std::uint64_t>(push.op->total_size);
        std::size_t copied = 0;
        bool over = false;
        while (copied < step_bytes) {
            std::uint32_t chunk = 0;
            if (!claim_chunk(shared, push.generation, push.chunks, chunk)) {
                over = true;
                break;
            }
            std::uint64_t offset = std::uint64_t{chunk} * push.chunk_size;
            auto length =
                static_cast<std::size_t>(std::min<std::uint64_t>(push.chunk_size, total - offset));
            int error = copy_chunk(Direction::write, conn.peer_pid, push.target, push.mapped_target,
                                   segments_of(*push.op), offset, length);
            if (error != 0) {
                // The receiver reads the rest itself; saying so is the last thing we write.
                if (refused(error)) {
                    BMI_LOG(shm, "process_vm_writev refused (%s): receivers copy alone",
                            std::strerror(-error));
                    options_.split_copy = SplitMode::never;
                }
                shared.push_failed.store(1, std::memory_order_seq_cst);
                over = true;
                wrote = true;
                break;
            }
            shared.pushed.fetch_add(1, std::memory_order_seq_cst);
            copied += length;
            wrote = true;
            moved = true;
        }
        if (over)
            conn.pushes.erase(conn.pushes.begin() + static_cast<std::ptrdiff_t>(i));
        else
            ++i;
    }
    if (wrote) wake_peer(conn);  // the receiver may sleep waiting for our share
}

void ShmMethod::drop_pushes(Connection& conn, const Operation& op) {
    std::erase_if(conn.pushes, [&](const SplitPush& push) { return push.op == &op; });
}

}  // namespace bmi::method::shm
