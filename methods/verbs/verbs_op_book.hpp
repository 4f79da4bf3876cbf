// SPDX-License-Identifier: LGPL-2.1-or-later
// The operations a verbs instance holds, where each sits, and how each completes.
//
// Its own object because every completion (sends, READs, failures, cancel) takes this one
// path, which also decides whether post() or the Sink reports it (CompletionRouter).
#pragma once

#include <cstdint>

#include "methods/completion_router.hpp"
#include "methods/operation.hpp"
#include "methods/sink.hpp"
#include "methods/verbs/verbs_connection.hpp"

namespace bmi::method::verbs {

// Where a pending operation sits, in its method_state (0: not pending here).
enum class Place : std::uint8_t {
    posting = 1,   // inside post()
    send_queued,   // in its connection's sends, nothing on the wire
    send_rts,      // RTS sent, waiting for FIN; its slots hold the cookie
    recv_posted,   // in the peer's posted list
    recv_reading,  // READs in flight; its slots hold the RecvTransfer
};

class VerbsOpBook {
public:
    // What verbs keeps in each pending operation (method_slots).
    struct Slots {
        Connection* connection = nullptr;  // send_queued: the connection it waits on
        RecvTransfer* transfer = nullptr;  // recv_reading: the READs that fill it
        std::uint64_t cookie = 0;          // send_rts: its transfer
    };
    static Slots& slots(Operation& op) { return method_slots<Slots>(op); }

    explicit VerbsOpBook(Sink& sink) : completions_(sink) {}

    static void place(Operation& op, Place where) {
        op.method_state = static_cast<std::uint8_t>(where);
    }
    // post() is under way for op: it is placed, its slots cleared, and a completion of op
    // before end_post becomes post()'s result.
    void begin_post(Operation& op) {
        place(op, Place::posting);
        slots(op) = Slots{};
        completions_.begin_post(op);
    }
    // What post() returns: 1 or the op's error if it finished meanwhile, else rc.
    int end_post(int rc) { return completions_.end_post(rc); }
    // Hands op back with error (0: success); never twice, as it clears the place.
    void finish(Operation& op, int error);
    // Every receive still posted for peer ends with error.
    void fail_posted_recvs(VerbsPeer& peer, int error);

private:
    CompletionRouter completions_;
};

}  // namespace bmi::method::verbs
