// SPDX-License-Identifier: LGPL-2.1-or-later
// Asynchronous events of the device (ibv_get_async_event): what the hardware reports outside any
// work completion. A queue pair that the device put in the error state on its own (a fatal or
// protocol error on the responder side) may have nothing posted that would flush and tell us,
// so without these events its peer's receives would wait until the bootstrap socket or a
// timeout noticed.
#include <sys/epoll.h>

#include <vector>

#include "methods/verbs/verbs_method_impl.hpp"
#include "support/error/error_map.hpp"
#include "support/logging/log.hpp"
#include "support/optional_library/ibverbs.hpp"

namespace bmi::method::verbs {

namespace {
// What a queue pair event means for its connection: a BMI code, or 0 if the connection lives on.
int qp_event_error(ibv_event_type type) {
    switch (type) {
        case IBV_EVENT_QP_FATAL:
            return -BMI_EIO;           // the device cannot go on with this QP
        case IBV_EVENT_QP_REQ_ERR:     // the peer sent a request our QP cannot take
        case IBV_EVENT_QP_ACCESS_ERR:  // the peer's request broke an access check here
            return -BMI_EPROTO;
        case IBV_EVENT_PATH_MIG_ERR:
            return -BMI_EHOSTUNREACH;  // no path left to the peer
        default:
            return 0;
    }
}

bool is_qp_event(ibv_event_type type) {
    switch (type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            return true;
        default:
            return false;
    }
}
}  // namespace

void VerbsMethod::drain_async_events() {
    if (device_failed_ != 0) return;
    ibv_async_event event;
    // The fd is nonblocking: the loop ends with EAGAIN. Each event is acknowledged at once,
    // before anything can destroy a QP (ibv_destroy_qp waits for the acks of its events); the
    // handler only compares the element pointer with ours and never follows it.
    while (support::ibv().get_async_event(device_->context, &event) == 0) {
        const ibv_async_event copy = event;
        support::ibv().ack_async_event(&event);
        on_async_event(copy);
        if (device_failed_ != 0) return;
    }
}

void VerbsMethod::on_async_event(const ibv_async_event& event) {
    const ibv_event_type type = event.event_type;
    const char* what = support::ibv().event_type_str(type);
    if (is_qp_event(type)) {
        Connection* c = queue_pairs_.by_address(event.element.qp);
        if (c == nullptr) {
            // A QP destroyed since, or a pointer that is not ours: nothing to act on.
            BMI_LOG(verbs, "verbs: async event %s for a queue pair we do not have", what);
            return;
        }
        const int error = qp_event_error(type);
        if (error == 0) {
            // LAST_WQE_REACHED follows every QP of ours that enters the error state (they
            // use the SRQ), COMM_EST a first packet in RTR: news, not trouble.
            BMI_LOG(verbs, "verbs: connection %llu: %s", static_cast<unsigned long long>(c->id),
                    what);
            return;
        }
        if (c->state == Connection::State::failed) return;
        BMI_LOG(error, "verbs: connection %llu: the device reported %s; failing it with %s",
                static_cast<unsigned long long>(c->id), what, support::error_name(error));
        fail_connection(*c, error);
        return;
    }
    switch (type) {
        case IBV_EVENT_DEVICE_FATAL:
            BMI_LOG(error, "verbs: device %s reported %s; every connection fails",
                    device_->name.c_str(), what);
            // A dead device's fds may stay readable for good: stop watching them, or every
            // wait would return at once.
            device_failed_ = -BMI_ENODEV;
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, device_->context->async_fd, nullptr);
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, device_->channel->fd, nullptr);
            fail_all_connections(-BMI_ENODEV);
            return;
        case IBV_EVENT_PORT_ERR:
            if (event.element.port_num != device_->port) break;
            BMI_LOG(error, "verbs: %s port %u reported %s; its connections fail",
                    device_->name.c_str(), static_cast<unsigned>(device_->port), what);
            fail_all_connections(-BMI_ENETDOWN);
            return;
        case IBV_EVENT_CQ_ERR:   // overrun: completions are lost, no transfer can be trusted
        case IBV_EVENT_SRQ_ERR:  // no receive can arrive any more
            BMI_LOG(error, "verbs: device %s reported %s; every connection fails",
                    device_->name.c_str(), what);
            fail_all_connections(-BMI_EIO);
            return;
        default:
            break;
    }
    BMI_LOG(verbs, "verbs: async event %s", what);
}

void VerbsMethod::fail_all_connections(int error) {
    std::vector<Connection*> all;
    for (auto& [id, c] : connections_) all.push_back(c.get());
    for (Connection* c : all) fail_connection(*c, error);
}

}  // namespace bmi::method::verbs
