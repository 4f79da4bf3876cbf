// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ofi_raw_endpoint.hpp"

#if BMI_METHOD_OFI
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <thread>
#include <utility>

#include "methods/ofi/ofi_shm.hpp"
#include "support/optional_library/libfabric.hpp"

namespace bmi::test {

OfiRawEndpoint::OfiRawEndpoint(const std::string& address) {
    auto target = method::ofi::parse_address(address);
    if (!target || support::load_libfabric() == nullptr) return;
    method::ofi::OfiAddress own = *target;
    if (target->has_port()) {
        own.service = std::string("0");  // on the server's host: the suite's are local
    } else {
        own.node = method::ofi::shm_client_name();
    }
    std::string why;
    if (fabric_.open(own, true, 256, 0, {}, why) != 0) return;
    // verbs: every buffer the provider touches is registered (FI_MR_LOCAL).
    if (fabric_.needs_local_mr()) registrations_.use(fabric_.domain());
    if (!target->has_port()) {
        // In this process with the server: its sends to us ask first (ofi_shm.hpp).
        shm_address_ = method::ofi::format_address("shm", own.node);
        method::ofi::note_shm_endpoint(shm_address_, true);
    }
    if (!insert_server(*target)) return;
    for (auto& slot : slots_)
        if (!post(slot)) return;
    ready_ = true;
}

OfiRawEndpoint::~OfiRawEndpoint() {
    if (!shm_address_.empty()) method::ofi::note_shm_endpoint(shm_address_, false);
    // As the method does before it closes: disconnections rxm has not seen yet are taken in
    // first, since over verbs closing with one pending crashed inside the provider.
    fi_cq_tagged_entry entry{};
    for (int i = 0; i < 16; ++i) (void)fi_cq_read(fabric_.cq(), &entry, 1);
    // Registrations go after the endpoint that may still use them, before its domain.
    fabric_.close_endpoint();
    for (auto& slot : slots_) method::ofi::Registrations::release(slot.own_mr);
    for (auto& own : sent_mrs_) method::ofi::Registrations::release(own);
}

bool OfiRawEndpoint::insert_server(const method::ofi::OfiAddress& target) {
    if (!target.has_port()) {
        const std::string name = method::ofi::shm_endpoint_name(target.node);
        return fi_av_insert(fabric_.av(), name.c_str(), 1, &server_, 0, nullptr) == 1;
    }
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<std::uint16_t>(std::stoul(target.service)));
    if (inet_pton(AF_INET, target.node.c_str(), &in.sin_addr) != 1) return false;
    return fi_av_insert(fabric_.av(), &in, 1, &server_, 0, nullptr) == 1;
}

bool OfiRawEndpoint::post(Slot& slot) {
    if (registrations_.active() && slot.own_mr == nullptr &&
        registrations_.acquire(slot.bytes.data(), slot.bytes.size(), false, slot.desc,
                               slot.own_mr) != 0)
        return false;
    return fabric_.post_buffer(slot.bytes.data(), slot.bytes.size(), slot.desc,
                               method::ofi::control_ignore, &slot.token, &slot.context) == 0;
}

bool OfiRawEndpoint::describe(void* data, std::size_t size, void*& desc) {
    desc = nullptr;
    return !registrations_.active() ||
           registrations_.acquire(data, size, true, desc, sent_mrs_.emplace_back()) == 0;
}

bool OfiRawEndpoint::send_tagged(std::uint64_t tag, const std::vector<std::byte>& body) {
    sent_.push_back(body);
    auto& bytes = sent_.back();
    auto& context = send_contexts_.emplace_back();
    void* desc = nullptr;
    if (!describe(bytes.data(), bytes.size(), desc)) return false;
    // A large message's data goes tagged on every provider, as the method's does; shm carries
    // the other messages' tags as remote CQ data (send_small).
    const bool data = (tag & method::ofi::data_bit) != 0;
    for (int tries = 0; tries < 1000; ++tries) {
        const auto rc =
            data ? fi_tsend(fabric_.ep(), bytes.data(), bytes.size(), desc, server_, tag, &context)
                 : fabric_.send_small(bytes.data(), bytes.size(), desc, server_, tag, &context);
        if (rc == 0) return true;
        if (rc != -FI_EAGAIN) return false;
        drain(1);
    }
    return false;
}

std::optional<std::vector<std::byte>> OfiRawEndpoint::await(method::ofi::Kind kind, int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    do {
        if (drain(1) == kind && last_body_) return std::exchange(last_body_, std::nullopt);
    } while (std::chrono::steady_clock::now() < until);
    return std::nullopt;
}

std::optional<method::ofi::Kind> OfiRawEndpoint::drain(int sleep_ms) {
    std::optional<method::ofi::Kind> got;
    fi_cq_tagged_entry entry{};
    for (;;) {
        const auto n = fi_cq_read(fabric_.cq(), &entry, 1);
        if (n == -FI_EAVAIL) {
            // A send that failed has ended too (a server that forgot us closes our connection).
            fi_cq_err_entry error{};
            if (fi_cq_readerr(fabric_.cq(), &error, 0) != 1) break;
            bool slot_ended = false;
            for (auto& slot : slots_)
                if (error.op_context == &slot.context) {
                    post(slot);
                    slot_ended = true;
                }
            if (!slot_ended) ++sends_done_;
            continue;
        }
        if (n != 1) break;
        bool ours = false;
        for (auto& slot : slots_)
            if (entry.op_context == &slot.context) {
                if (auto kind = method::ofi::kind_of(fabric_.tag_of(entry))) {
                    got = kind;
                    last_body_.emplace(slot.bytes.begin(),
                                       slot.bytes.begin() + fabric_.body_length(entry));
                    last_token_ = slot.token;
                }
                post(slot);
                ours = true;
            }
        if (!ours) ++sends_done_;
    }
    if (!got && sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    return got;
}

bool OfiRawEndpoint::sends_end(std::uint64_t goal) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sends_done_ < goal && std::chrono::steady_clock::now() < until) drain(0);
    return sends_done_ >= goal;
}

}  // namespace bmi::test
#endif
