// SPDX-License-Identifier: LGPL-2.1-or-later
// A checked client of examples/pvfs_server over the C++ API (pvfs_session_client.hpp).
#include "pvfs_session_client.hpp"

#include <cstring>

namespace bmi::soak {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string method_for(const std::string& address) {
    char method[32];
    return pvfs_method_for(address.c_str(), method, sizeof method);
}

}  // namespace

std::unique_ptr<PvfsSessionClient> PvfsSessionClient::open(const std::string& server,
                                                           std::size_t size,
                                                           std::chrono::milliseconds timeout,
                                                           std::string& why) {
    if (size < sizeof(pvfs_response) || size > PVFS_MAX_RESPONSE) {
        why = "answer size out of range";
        return nullptr;
    }
    std::unique_ptr<PvfsSessionClient> c(new PvfsSessionClient);
    c->size_ = size;
    c->timeout_ = timeout;
    auto session = Session::create({method_for(server), "", 0, ""});
    if (!session) {
        why = "session: " + session.error().message();
        return nullptr;
    }
    c->session_ = std::move(*session);
    auto context = c->session_->open_context();
    auto address = c->session_->lookup(server);
    if (!context || !address) {
        why = "open_context/lookup " + server + ": " +
              (!context ? context.error() : address.error()).message();
        return nullptr;
    }
    c->context_ = std::move(*context);
    c->server_ = *address;
    auto request = c->session_->allocate(c->server_, sizeof(pvfs_request));
    auto response = c->session_->allocate(c->server_, static_cast<bmi_size_t>(size));
    if (!request || !response) {
        why = "allocate: " + (!request ? request.error() : response.error()).message();
        return nullptr;
    }
    c->request_ = std::move(*request);
    c->response_ = std::move(*response);
    return c;
}

bool PvfsSessionClient::wait(const Posted& posted, bmi_size_t& actual, std::string& why) {
    actual = posted.actual_size;
    if (posted.immediate) return true;
    auto deadline = Clock::now() + timeout_;
    bool cancelled = false;
    for (;;) {
        auto done = session_->test(context_, posted.id, 100ms);
        if (!done) {
            why = "test: " + done.error().message();
            return false;
        }
        if (*done) {
            actual = (*done)->actual_size;
            if (cancelled) {
                why = "no answer within the deadline";
                return false;
            }
            if ((*done)->error) {
                why = (*done)->error.message();
                return false;
            }
            return true;
        }
        if (Clock::now() < deadline) continue;
        if (cancelled) {
            why = "a cancelled operation never completed";
            return false;
        }
        // Collected after the cancel, so the buffer is ours again before we return.
        session_->cancel(context_, posted.id);
        cancelled = true;
        deadline = Clock::now() + 2s;
    }
}

Outcome PvfsSessionClient::verify(std::uint64_t request_id, bmi_size_t actual,
                                  std::string& why) const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(response_.bytes().data());
    pvfs_response head;
    if (actual != static_cast<bmi_size_t>(size_)) {
        why = "answer of " + std::to_string(actual) + " bytes, wanted " + std::to_string(size_);
        return Outcome::corrupt;
    }
    std::memcpy(&head, bytes, sizeof(head));
    if (head.magic != PVFS_PROTO_MAGIC || head.request_id != request_id || head.status != 0 ||
        head.size != size_) {
        why = "answer header does not match request " + std::to_string(request_id);
        return Outcome::corrupt;
    }
    const std::size_t payload = size_ - sizeof(head);
    const std::size_t bad = pvfs_pattern_check(bytes + sizeof(head), payload, request_id);
    if (bad != payload) {
        why = "payload byte " + std::to_string(bad) + " wrong in request " +
              std::to_string(request_id);
        return Outcome::corrupt;
    }
    return Outcome::ok;
}

Outcome PvfsSessionClient::exchange(std::uint32_t op, std::uint64_t request_id, bmi_msg_tag_t tag,
                                    std::string& why) {
    pvfs_request req{PVFS_PROTO_MAGIC, op, request_id, size_};
    std::memcpy(request_.bytes().data(), &req, sizeof(req));
    // Stale bytes of the previous answer must not pass the check.
    std::memset(response_.bytes().data(), 0, size_);
    // As in PVFS: the receive for the answer is posted before the request leaves.
    auto recv = session_->post_recv(context_, server_, response_.bytes(), tag);
    if (!recv) {
        why = "post_recv: " + recv.error().message();
        return Outcome::lost;
    }
    auto send = session_->post_send_unexpected(context_, server_, request_.bytes(), tag);
    bmi_size_t sent = 0, actual = 0;
    std::string send_why;
    const bool send_ok = send ? wait(*send, sent, send_why) : false;
    if (!send) send_why = "post_send_unexpected: " + send.error().message();
    // No answer can follow a request that never left: stop waiting for it now.
    if (!send_ok && !recv->immediate) session_->cancel(context_, recv->id);
    // The receive is collected in every case (cancelled if it never comes): its buffer is reused.
    const bool recv_ok = wait(*recv, actual, why);
    if (!send_ok) {
        why = send_why;
        return Outcome::lost;
    }
    if (!recv_ok) return Outcome::lost;
    return verify(request_id, actual, why);
}

}  // namespace bmi::soak
