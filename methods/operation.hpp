// SPDX-License-Identifier: LGPL-2.1-or-later
// What the control layer and a method share about one operation and one peer: the op's kind,
// buffers and completion fields, the method's own per-op state (method_slots), and the peer
// object both sides hold (methods/method.hpp has the locking rules that cover them).
#pragma once

#include <boost/intrusive/list_hook.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#include "bmi-types.h"
#include "support/op_queue/tagged_op_queue.hpp"

namespace bmi::method {

enum class OpKind : std::uint8_t {
    send,             // expected message: the receiver has (or will have) a matching recv
    send_unexpected,  // delivered through BMI_testunexpected; size <= unexpected_limit()
    recv,             // matches the oldest message from peer with the same tag
};

// One contiguous piece of a user buffer. Sends never write through data.
// The most list entries a send may have for Method::send_now to be tried.
inline constexpr std::size_t send_now_segments = 8;

struct Segment {
    void* data = nullptr;
    bmi_size_t size = 0;
};

class Peer;

using SafeHook =
    boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;

// A posted operation. The control layer allocates it, fills the request fields and keeps it
// alive until the method reports it complete; the method must not touch it afterwards.
struct Operation {
    // Free for the method: links the op on one of the method's own queues while it is pending.
    SafeHook method_hook;
    // Free for the method too, for an op filed twice at once: a posted receive sits in its
    // tag's queue and in the peer's post order (support::TaggedOpQueue).
    SafeHook method_order_hook;
    // Owned by the control layer (completion queue of the op's context).
    SafeHook core_hook;

    // --- request, set by the control layer before post() and constant afterwards ---
    OpKind kind = OpKind::send;
    Peer* peer = nullptr;  // kept alive by peer_ref below
    bmi_msg_tag_t tag = 0;
    // send_unexpected: the message class (standalone dialect, BMI_post_sendunexpected_class);
    // the receiver's BMI_testunexpected_class sees only its own class. 0 everywhere else.
    std::uint8_t msg_class = 0;
    const Segment* segments = nullptr;  // segment_count entries; &single for contiguous ops
    int segment_count = 0;
    bmi_size_t total_size = 0;  // send: bytes to send; recv: capacity of the segments
    Segment single;

    // --- result, set by the method before Sink::complete() or before post() returns 1 ---
    bmi_size_t actual_size = 0;

    // --- scratch for the method: progress through the segments while pending ---
    bmi_size_t transferred = 0;
    std::uint8_t method_state = 0;  // e.g. which of the method's queues holds the op; 0: none
    // The method's own per-operation state, a struct of its choosing seen through
    // method_slots<T>() (no side map keyed by the operation).
    alignas(8) std::byte method_storage[32] = {};

    // --- control layer bookkeeping ---
    bmi_op_id_t id = 0;
    bmi_context_id context = 0;
    void* user_ptr = nullptr;
    int error = 0;           // final status (0 or -BMI_E*), valid once completed
    bool completed = false;  // guarded by the core's state lock
    bool cancel_requested = false;
    std::shared_ptr<Peer> peer_ref;
    std::unique_ptr<Segment[]> segment_storage;  // list ops (native path)
    void* bounce = nullptr;                      // list emulation: the packed buffer
    const void* const* user_list = nullptr;      // list emulation: where to unpack
    const bmi_size_t* user_sizes = nullptr;
    int user_count = 0;
    int method_index = 0;
};

// The receives a peer has posted and no message has matched yet, as every method keeps them:
// by tag, earliest posted first (BMI matches peer and tag exactly), in O(1) expected time
// however many wait, and in post order for the paths that fail or refuse them all.
using PostedRecvs =
    support::TaggedOpQueue<Operation, bmi_msg_tag_t, SafeHook, &Operation::method_hook,
                           &Operation::method_order_hook, &Operation::tag>;

// A remote endpoint as one method knows it. Created by the method (lookup, or when an unknown
// peer contacts us); shared with the control layer, which keeps it alive while any BMI_addr_t
// or operation refers to it.
class Peer {
public:
    virtual ~Peer() = default;

    // The BMI_addr_t the control layer gave this peer, 0 until it is registered.
    BMI_addr_t addr() const { return addr_.load(std::memory_order_acquire); }
    void set_addr(BMI_addr_t a) { addr_.store(a, std::memory_order_release); }

    // Unique for the life of the process, unlike the object's address: what the control layer
    // charges to a peer must not pass to a new peer the allocator places where a freed one was.
    std::uint64_t serial() const { return serial_; }

    // Receives posted toward this peer that no message has matched yet; the method's alone
    // (under its lock), ended together through kit::fail_posted_recvs.
    PostedRecvs posted_recvs;

private:
    static std::uint64_t next_serial() {
        static std::atomic<std::uint64_t> last{0};
        return last.fetch_add(1, std::memory_order_relaxed) + 1;
    }

    std::atomic<BMI_addr_t> addr_{0};
    const std::uint64_t serial_ = next_serial();
};

// The typed view of an operation's method storage: T is one method's per-operation state, a
// trivially copyable struct that fits. Bytes are implicitly-created objects (C++20), so the
// view needs no constructor call; a method clears it with `= T{}` when it takes the op.
template <class T>
T& method_slots(Operation& op) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
    static_assert(sizeof(T) <= sizeof(Operation::method_storage) && alignof(T) <= 8);
    return *std::launder(reinterpret_cast<T*>(op.method_storage));
}
template <class T>
const T& method_slots(const Operation& op) {
    return method_slots<T>(const_cast<Operation&>(op));
}

}  // namespace bmi::method
