// SPDX-License-Identifier: LGPL-2.1-or-later
// Same-node peers (doc/architecture.md): a tcp lookup of a libbmi server on this node goes to
// the server's shm listener once its tcp side has offered it, and a server starts that
// listener when the first such client asks.

#include "bmi/core/method_set.hpp"
#include "methods/method_table.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/method_address/this_node.hpp"

namespace bmi::core {

namespace {
constexpr std::int64_t encryption_required = 2;  // the encryption setting's third choice
}  // namespace

bool MethodSet::same_node_allowed() const {
    return settings_.flag(support::SettingId::same_node_shm) && !allocation_.allocated() &&
           settings_.number(support::SettingId::encryption) != encryption_required &&
           shm_slot() != nullptr;
}

MethodSlot* MethodSet::shm_slot() const {
    for (const auto& slot : slots_)
        if (slot->descriptor->scheme == "shm") return slot.get();
    return nullptr;
}

std::optional<MethodSet::SameNodeChoice> MethodSet::same_node_route(const MethodSlot& tcp_slot,
                                                                    std::string_view address) {
    const auto ask = tcp_slot.descriptor->ask_same_node;
    if (ask == nullptr || !same_node_allowed()) return std::nullopt;
    auto parts = support::split_scheme(address);
    if (!parts) return std::nullopt;
    auto host_port = support::parse_host_port(parts->rest);
    if (!host_port) return std::nullopt;
    // Only a listener of our user in our network namespace can be the server's: without one
    // nobody is asked, so a server that cannot answer (OrangeFS's own) never sees the question.
    // Our own listener: this instance looking itself up keeps to tcp, as it always did (it
    // could not answer its own question while it asks).
    if (same_node_ && same_node_port_ == host_port->port) return std::nullopt;
    const std::string name = method::kit::same_node_listener_name(host_port->port);
    if (!method::kit::same_node_listener_exists(name)) return std::nullopt;
    // The same port on another node is another server, whose offer names a listener there.
    if (!support::names_this_node(host_port->host)) return std::nullopt;
    method::Config config = method_config(tcp_slot, "");
    {
        support::MutexLock activation(activation_mutex_);
        config.trusted = trusted_;
    }
    method::kit::SameNodeOffer offer;
    if (int rc = ask(address, config, offer); rc != 0) {
        BMI_LOG(address, "lookup %.*s: no same-node offer (%d), staying on tcp",
                static_cast<int>(address.size()), address.data(), rc);
        return std::nullopt;
    }
    MethodSlot* shm = shm_slot();
    if (int rc = start_client(*shm); rc != 0) return std::nullopt;
    SameNodeChoice out;
    out.shm_index = shm->index;
    out.hint.route = std::make_shared<method::kit::SameNodeRoute>(
        std::move(offer),
        [ask, where = std::string(address), config]() -> std::optional<method::kit::SameNodeOffer> {
            method::kit::SameNodeOffer fresh;
            if (ask(where, config, fresh) != 0) return std::nullopt;
            return fresh;
        },
        renewals_);
    return out;
}

void MethodSet::renew_same_node_routes() {
    MethodSlot* shm = shm_slot();
    for (const auto& route : renewals_->take()) {
        route->renew();
        support::MutexLock lock(shm->lock);
        shm->method->set_info(nullptr, method::info_same_node_renewed, route.get());
    }
}

void MethodSet::reserve_same_node_listener() {
    MethodSlot* shm = shm_slot();
    MethodSlot* tcp = nullptr;
    for (const auto& slot : slots_)
        if (slot->descriptor->ask_same_node != nullptr && slot->active.load()) tcp = slot.get();
    if (tcp == nullptr || shm->descriptor->reserve_same_node == nullptr) return;
    int port = 0;
    {
        support::MutexLock lock(tcp->lock);
        if (tcp->method->get_info(nullptr, method::info_listen_port, &port) != 0) return;
    }
    const std::string name = method::kit::same_node_listener_name(static_cast<unsigned>(port));
    int fd = -1;
    // Taken already (another server of this user on the same port of another address): its
    // clients stay on tcp, which says nothing more than the shm log line.
    if (shm->descriptor->reserve_same_node(name, fd) != 0) return;
    same_node_->reserve(static_cast<unsigned>(port), name, fd);
    same_node_port_ = static_cast<unsigned>(port);
    BMI_LOG(control, "same-node listener shm://%s reserved for tcp port %d", name.c_str(), port);
}

void MethodSet::serve_same_node() {
    if (!same_node_->take_request()) return;
    MethodSlot& shm = *shm_slot();
    int rc = 0;
    if (!shm.active.load()) {
        method::Config config = method_config(shm, "");
        config.same_node = same_node_;
        rc = activate(shm.index, config);
    } else {
        // Already running, as a client of other same-node servers: it listens from now on.
        support::MutexLock lock(shm.lock);
        rc = shm.method->set_info(nullptr, method::info_serve_same_node, &same_node_);
    }
    if (rc != 0) {
        same_node_->listener_unavailable();
        BMI_LOG(error,
                "the same-node listener did not start (%d): tcp clients on this node stay "
                "on tcp",
                rc);
        return;
    }
    BMI_LOG(control, "same-node listener served from now on");
}

}  // namespace bmi::core
