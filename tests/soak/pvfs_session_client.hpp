// SPDX-License-Identifier: LGPL-2.1-or-later
// One client of examples/pvfs_server through the C++ API: a Session of its own, so each object
// is a distinct peer to the server (its own connection, its own address there), and checked
// exchanges in the example's protocol (examples/pvfs_proto.h). Shared by the churn driver and
// the soak client.
#pragma once

#include <bmi/bmi.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "pvfs_proto.h"

namespace bmi::soak {

// What became of one request.
enum class Outcome {
    ok,       // the answer arrived and every byte matched its request's pattern
    lost,     // no answer: an operation failed, or nothing came before the deadline
    corrupt,  // an answer came, but its header or a payload byte was wrong
};

class PvfsSessionClient {
public:
    // A client-only session for the method the address names ("shm://x" -> bmi_shm), the
    // server's address looked up (which connects nothing yet) and two buffers for answers of
    // size bytes. why says what failed when the result is empty.
    static std::unique_ptr<PvfsSessionClient> open(const std::string& server, std::size_t size,
                                                   std::chrono::milliseconds timeout,
                                                   std::string& why);

    // Sends one request (op from pvfs_proto.h) and waits for its answer, at most the timeout
    // for each of the send and the receive; a late operation is cancelled and collected, so
    // the buffers are free again whatever the outcome. why says what went wrong unless ok.
    Outcome exchange(std::uint32_t op, std::uint64_t request_id, bmi_msg_tag_t tag,
                     std::string& why);

private:
    PvfsSessionClient() = default;
    // Waits for id; false (with why) if it failed or missed the deadline.
    bool wait(const Posted& posted, bmi_size_t& actual, std::string& why);
    Outcome verify(std::uint64_t request_id, bmi_size_t actual, std::string& why) const;

    // Declared first so they are destroyed last: buffers and the context belong to it.
    std::unique_ptr<Session> session_;
    Context context_;
    Address server_;
    Buffer request_;
    Buffer response_;
    std::size_t size_ = 0;
    std::chrono::milliseconds timeout_{0};
};

}  // namespace bmi::soak
