// SPDX-License-Identifier: LGPL-2.1-or-later
// Large messages copied across processes (shm_large_copies.hpp): the receiver's choice of
// path and its single copies; split copies (the protocol is described in shm_split.hpp), the
// receiver's side (start, claim and read, wait for the sender's share, finish or fall back)
// and the sender's side (answer HELP, claim and write).
#include "methods/shm/shm_large_copies.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <poll.h>
#include <sched.h>

#include "methods/shm/shm_checks.hpp"
#include "methods/shm/shm_copy.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"

namespace bmi::method::shm {

namespace {
// Bytes the receiver copies per progress step, so a call into the method stays short (the
// sender's steps copy whole chunks: shm_split.hpp, ChunkInHand).
constexpr std::size_t step_bytes = std::size_t{1} << 20;
// How long closing a connection waits for a live sender to finish the chunks it claimed.
constexpr auto quiesce_limit = std::chrono::milliseconds(500);

// Half the message, 16-256 KiB, whole pages: two chunks let both sides start at once on a
// small message; more, smaller chunks on a large one let the faster side take more of them,
// and a system call per 256 KiB costs nothing that shows.
// Through mapped memory (shm_region.hpp) a chunk costs no system call, only a claim: an eighth
// of the message, up to 8 MiB. Fewer chunks leave one side idle while the other copies its
// last; more ran slower, for reasons not found (doc/perf/code-figures.md, "Split chunks").
std::uint64_t chunk_size_for(bmi_size_t size, bool mapped) {
    auto bytes = static_cast<std::uint64_t>(size);
    std::uint64_t chunk = mapped ? std::clamp<std::uint64_t>(bytes / 8, 16u << 10, 8u << 20)
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

ShmLargeCopies::ShmLargeCopies(const Options& options, ShmOpBook& ops, ShmSharedBuffers& buffers)
    : single_copy_(options.single_copy),
      split_mode_(options.split_copy),
      eager_limit_(options.eager_limit),
      single_copy_min_(options.single_copy_min),
      pull_piece_(options.pull_piece),
      ops_(ops),
      buffers_(buffers) {}

void ShmLargeCopies::start_transfer(Connection& conn, Operation& op, bmi_size_t size,
                                    std::uint64_t cookie, std::vector<RemoteIov> iovs) {
    if (size > op.total_size) {
        op.actual_size = 0;
        ops_.finish(op, -BMI_EMSGSIZE);
        conn.controls.push_back(Control{MsgType::nak, cookie, 0, -BMI_EMSGSIZE});
        return;
    }
    op.actual_size = size;
    op.transferred = 0;
    ops_.place(op, Place::in_flight, conn.id);
    ShmOpBook::slots(op).cookie = cookie;
    // The path is ours to choose (shm_options.hpp): both processes copy, we copy alone, or
    // the sender streams the message through the ring. A sender's buffer we can map is
    // split at once (memcpy by both processes), unless split copy is off or the sender waits
    // on our CPU, where it could not copy while we do: then we copy it alone, with memcpy.
    std::vector<Segment> mapped;
    PeerRegions::Keep keep;
    if (!iovs.empty()) buffers_.take_offers(conn);
    if (!iovs.empty() && conn.peer_regions.translate(iovs, mapped, keep) &&
        start_split(conn, op, size, cookie, iovs, 0, mapped, keep,
                    split_mode_ != SplitMode::never && !conn.peer_waits_on(sched_getcpu())))
        return;
    bool adaptive = split_mode_ == SplitMode::adaptive && single_copy_ && !iovs.empty();
    LargePath path = adaptive ? paths_.pick(size) : LargePath::split;
    std::uint64_t started = adaptive ? monotonic_ns() : 0;
    mapped.clear();
    if (path == LargePath::split &&
        start_split(conn, op, size, cookie, iovs, started, mapped, keep, true))
        return;
    if (path == LargePath::split && single_copy_ && !iovs.empty() && size >= single_copy_min_) {
        conn.pulls.push_back(Pull{&op, cookie, std::move(iovs), size});
        return;
    }
    // Only a stream the choice asked for is timed: one that stands in for a split that could
    // not start (no board entry free) says nothing about either path.
    conn.receives.emplace(cookie, StreamReceive{&op, path == LargePath::stream ? started : 0});
    conn.controls.push_back(Control{MsgType::cts, cookie, 0, 0});
}

void ShmLargeCopies::took(TakenPath path, bmi_size_t size) {
    ++taken_[PathChoice::class_of(size)][static_cast<std::size_t>(path)];
}

void ShmLargeCopies::timed(LargePath path, bmi_size_t size, std::uint64_t started_ns) {
    if (started_ns == 0) return;
    if (!paths_.record(path, size, monotonic_ns() - started_ns)) return;
    LargePath now = paths_.preferred(size), other = other_path(now);
    BMI_LOG(shm, "shm: receives of %lld bytes now take %s (%.3f ns/B; %s %.3f ns/B)",
            static_cast<long long>(size), path_name(now), paths_.cost(now, size), path_name(other),
            paths_.cost(other, size));
}

// One bounded step of every single-copy receive on this connection.
int ShmLargeCopies::advance_pulls(Connection& conn, bool& moved) {
    std::size_t count = conn.pulls.size();
    for (std::size_t i = 0; i < count && !conn.pulls.empty(); ++i) {
        Pull pull = std::move(conn.pulls.front());
        conn.pulls.pop_front();
        Operation& op = *pull.op;
        auto left = static_cast<std::size_t>(pull.size - op.transferred);
        long n = left == 0 ? 0
                           : read_remote(conn.peer_pid, pull.iovs, segments_of(op),
                                         static_cast<std::uint64_t>(op.transferred),
                                         std::min(left, pull_piece_));
        if (n > 0 || left == 0) {
            moved = true;
            op.transferred += n > 0 ? n : 0;
            if (op.transferred == pull.size) {
                conn.controls.push_back(Control{MsgType::done, pull.cookie, 0, 0});
                took(TakenPath::single, pull.size);
                ops_.finish(op, 0);
            } else {
                conn.pulls.push_back(std::move(pull));
            }
            continue;
        }
        if (n == -EPERM || n == -ENOSYS || n == -EACCES) {
            if (single_copy_)
                BMI_LOG(shm, "process_vm_readv refused (%s): large messages use two copies",
                        std::strerror(static_cast<int>(-n)));
            single_copy_ = false;
            conn.receives.emplace(pull.cookie, StreamReceive{&op, 0});
            conn.controls.push_back(
                Control{MsgType::cts, pull.cookie, static_cast<std::uint64_t>(op.transferred), 0});
            moved = true;
            continue;
        }
        if (n == -ESRCH) {
            conn.pulls.push_front(std::move(pull));  // close_connection fails it
            return -BMI_ECONNRESET;
        }
        // The sender described memory it does not have: fail both ends of this message.
        BMI_LOG(error, "shm: reading the sender's buffer failed: %s",
                std::strerror(static_cast<int>(-n)));
        int error = support::bmi_error_from_errno(static_cast<int>(-n));
        ops_.finish(op, error);
        conn.controls.push_back(Control{MsgType::nak, pull.cookie, 0, error});
        moved = true;
    }
    return 0;
}

// --- split copies: the receiving side ---

bool ShmLargeCopies::start_split(Connection& conn, Operation& op, bmi_size_t size,
                                 std::uint64_t cookie, std::vector<RemoteIov>& source,
                                 std::uint64_t started_ns, std::vector<Segment>& mapped,
                                 PeerRegions::Keep& keep, bool ask_sender) {
    // Through the kernel a split needs both our permission to read the sender and the
    // sender's to help; from a mapped buffer we can always copy it all ourselves.
    bool kernel_ok = split_mode_ != SplitMode::never && single_copy_;
    if ((!kernel_ok && mapped.empty()) || source.empty() || conn.board_free == 0 ||
        conn.state != ConnState::open)
        return false;
    // The sender is asked with our buffer's pieces in one HELP record; copying alone from a
    // mapped buffer names nothing, so a receive of any number of pieces can.
    const bool helped = ask_sender || mapped.empty();
    std::vector<RemoteIov> target;
    if (helped) {
        const auto limit = static_cast<std::size_t>(inline_limit(conn.tx, eager_limit_));
        std::size_t room = limit > sizeof(HelpInfo) ? (limit - sizeof(HelpInfo)) / sizeof(RemoteIov)
                                                    : 0;
        target.resize(static_cast<std::size_t>(nonempty_segments(segments_of(op))));
        if (target.empty() || target.size() > room) return false;
        describe_segments(segments_of(op), target);
    }

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
    split.helped = helped;
    if (!split.helped) {
        conn.splits.push_back(std::move(split));
        return true;
    }

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

int ShmLargeCopies::advance_splits(Connection& conn, bool& moved) {
    for (std::size_t i = 0; i < conn.splits.size();) {
        SplitReceive& split = conn.splits[i];
        SplitBoardEntry& shared = conn.own_board[split.entry];
        Operation& op = *split.op;
        std::size_t copied = 0;
        int error = 0;
        const auto total = static_cast<std::uint64_t>(split.size);
        while (copied < step_bytes) {
            ChunkInHand& hand = split.in_hand;
            if (!hand.held) {
                std::uint32_t chunk = 0;
                if (split.claims_done) break;
                if (!claim_chunk(shared, split.generation, split.chunks, chunk)) {
                    split.claims_done = true;
                    split.sender_share = split.chunks - split.own;
                    break;
                }
                ++split.own;
                hand = ChunkInHand{chunk, 0, true};
            }
            std::uint64_t start = std::uint64_t{hand.index} * split.chunk_size;
            std::uint64_t chunk_length = std::min(split.chunk_size, total - start);
            auto length = static_cast<std::size_t>(
                std::min<std::uint64_t>(chunk_length - hand.copied, step_bytes - copied));
            error = copy_chunk(Direction::read, conn.peer_pid, split.source, split.mapped_source,
                               segments_of(op), start + hand.copied, length);
            if (error != 0) break;
            hand.copied += length;
            hand.held = hand.copied < chunk_length;
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
        if (!split.claims_done || split.in_hand.held) {
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
            took(done.mapped_source.empty() ? TakenPath::split
                 : done.helped              ? TakenPath::shared
                                            : TakenPath::shared_single,
                 done.size);
            ops_.finish(op, 0);
            conn.controls.push_back(Control{MsgType::done, done.cookie, 0, 0});
        }
    }
    return 0;
}

void ShmLargeCopies::close_split_claims(Connection& conn, SplitReceive& split) {
    if (split.claims_done) return;
    std::uint32_t taken = close_claims(conn.own_board[split.entry], split.generation, split.chunks);
    split.claims_done = true;
    split.sender_share = taken - split.own;
}

void ShmLargeCopies::wait_for_sender(Connection& conn, SplitReceive& split) {
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

bool ShmLargeCopies::cancel_split(Connection& conn, Operation& op) {
    for (auto& split : conn.splits) {
        if (split.op != &op) continue;
        // Nothing more for the sender to claim; the receive ends once its claimed chunks are
        // written (advance_splits), so nothing lands in the buffer after the cancel.
        close_split_claims(conn, split);
        split.in_hand.held = false;  // what we have not copied yet is not wanted
        split.cancelled = true;
        BMI_LOG(shm, "cancel of a split receive: %u of %u chunks are the sender's to finish",
                split.sender_share, split.chunks);
        return true;
    }
    return false;
}

void ShmLargeCopies::end_splits(Connection& conn, int error) {
    for (auto& split : conn.splits) {
        wait_for_sender(conn, split);
        ops_.finish(*split.op, error);
    }
    conn.splits.clear();
    conn.pushes.clear();
}

// --- the sending side ---

int ShmLargeCopies::on_help(Connection& conn, Operation& op, const MsgHeader& header) {
    HelpInfo info{};
    Window window = conn.rx.peek(header.slots);
    window.read(header_size, &info, sizeof info);
    auto total = static_cast<std::uint64_t>(op.total_size);
    // The chunks must cover exactly our message (no products: they could overflow).
    bool sane = info.entry < split_board_entries && info.chunk_size > 0 && header.aux > 0 &&
                info.chunks == total / info.chunk_size + (total % info.chunk_size != 0);
    if (!sane) return -BMI_EPROTO;
    ShmOpBook::slots(op).board_entry = info.entry + 1;  // its progress counts (stall deadline)
    if (split_mode_ == SplitMode::never) return 0;      // the receiver copies it all
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

void ShmLargeCopies::advance_pushes(Connection& conn, bool& moved) {
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
                    split_mode_ = SplitMode::never;
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
    if (wrote) conn.wake_peer();  // the receiver may sleep waiting for our share
}

void ShmLargeCopies::drop_pushes(Connection& conn, const Operation& op) {
    std::erase_if(conn.pushes, [&](const SplitPush& push) { return push.op == &op; });
}

}  // namespace bmi::method::shm
