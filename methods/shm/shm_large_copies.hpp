// SPDX-License-Identifier: LGPL-2.1-or-later
// Large messages a process copies out of (or into) its peer's memory: the receiver's choice
// of path, single copies (process_vm_readv) and split copies (shm_split.hpp).
//
// Its own object because these paths share what the kernel lets us do (a refused copy turns
// them off for good) and the timings that choose between them; the ring protocol only hands
// it a matched announcement and the HELP the receiver sends.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "methods/shm/shm_connection.hpp"
#include "methods/shm/shm_method.hpp"
#include "methods/shm/shm_op_book.hpp"
#include "methods/shm/shm_options.hpp"
#include "methods/shm/shm_path_choice.hpp"
#include "methods/shm/shm_shared_buffers.hpp"

namespace bmi::method::shm {

class ShmLargeCopies {
public:
    ShmLargeCopies(const Options& options, ShmOpBook& ops, ShmSharedBuffers& buffers);

    // False once the kernel refused process_vm_readv (or BMI_SHM_SINGLE_COPY=0): an RTS then
    // lists no iovecs unless the buffer is shared.
    bool single_copy() const { return single_copy_; }

    // Receiver: a receive matched an RTS of size bytes; picks the path and starts it.
    void start_transfer(Connection& conn, Operation& op, bmi_size_t size, std::uint64_t cookie,
                        std::vector<RemoteIov> iovs);
    // One bounded step of every single-copy receive on conn; 0 or the error to close it with.
    int advance_pulls(Connection& conn, bool& moved);
    // A large receive that took its path at started_ns (0: untimed) is complete.
    void timed(LargePath path, bmi_size_t size, std::uint64_t started_ns);
    // A large receive of size bytes completed over path (Stats::large_receives).
    void took(TakenPath path, bmi_size_t size);
    const LargeReceiveCounts& taken() const { return taken_; }

    // Receiver: one bounded step of every split receive on conn; 0 or the error to close it
    // with.
    int advance_splits(Connection& conn, bool& moved);
    // Hands the sender nothing more and waits (bounded) until its claimed chunks are written.
    void wait_for_sender(Connection& conn, SplitReceive& split);
    // True if op is a split receive on conn: it ends once the sender is out of its buffer
    // (the caller wakes us to finish it).
    bool cancel_split(Connection& conn, Operation& op);
    // Closing: every split receive ends with error once the sender is out of its buffer, and
    // our help with the peer's receives stops.
    void end_splits(Connection& conn, int error);

    // Sender: a HELP for op; then our share of the copying, step by step.
    int on_help(Connection& conn, Operation& op, const MsgHeader& header);
    void advance_pushes(Connection& conn, bool& moved);
    void drop_pushes(Connection& conn, const Operation& op);

private:
    // Starts a split copy of a matched message; false if it cannot be split. started_ns:
    // when it was chosen, for PathChoice; 0 if not timed. mapped: the source as mapped here
    // (empty: read through the kernel); moved from when it starts. ask_sender: HELP, so the
    // sender copies a share; false (mapped sources only): every chunk is copied here.
    bool start_split(Connection& conn, Operation& op, bmi_size_t size, std::uint64_t cookie,
                     std::vector<RemoteIov>& source, std::uint64_t started_ns,
                     std::vector<Segment>& mapped, PeerRegions::Keep& keep, bool ask_sender);
    void close_split_claims(Connection& conn, SplitReceive& split);

    bool single_copy_;      // cleared for good when the kernel refuses process_vm_readv
    SplitMode split_mode_;  // never for good when the kernel refuses process_vm_writev
    const bmi_size_t eager_limit_;
    const bmi_size_t single_copy_min_;
    const std::size_t pull_piece_;
    PathChoice paths_;  // split or stream, per size (BMI_SHM_SPLIT_COPY=auto)
    LargeReceiveCounts taken_{};
    ShmOpBook& ops_;
    ShmSharedBuffers& buffers_;
};

}  // namespace bmi::method::shm
