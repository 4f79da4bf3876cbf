// SPDX-License-Identifier: LGPL-2.1-or-later
// Starting and closing the methods, their Config, their names and addresses, and memalloc's
// memory. BMI_TRUSTED_CONNECTION is trusted_connection.cpp.
#include "bmi/core/method_set.hpp"

#include <algorithm>
#include <cstdlib>

#include "methods/method_table.hpp"
#include "methods/ofi/ofi_address.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/planes/plane.hpp"

namespace bmi::core {

int MethodSet::configure(const InitParams& params) {
    flags_ = params.flags;
    dialect_ = params.dialect;
    // Every setting, read once; the log already names each bad one.
    if (settings_.load(params.options) < 0) return -BMI_EINVAL;
    emulate_lists_ = settings_.flag(support::SettingId::emulate_lists);
    return allocation_.take(settings_, params.allocation);
}

int MethodSet::start(const InitParams& params, const MakeSink& make_sink) {
    auto methods = method::compiled_methods();
    auto wanted = support::split_address_list(params.method_list);
    for (std::size_t i = 0; i < methods.size(); ++i) {
        auto slot = std::make_unique<MethodSlot>();
        slot->descriptor = &methods[i];
        slot->index = static_cast<int>(i);
        slot->allowed = wanted.empty();
        slot->sink = &make_sink(slot->index);
        slots_.push_back(std::move(slot));
    }
    for (auto name : wanted) {
        const method::Descriptor* d = method::find_method(name);
        if (d == nullptr) {
            BMI_LOG(error, "BMI_initialize: method '%.*s' is not compiled in",
                    static_cast<int>(name.size()), name.data());
            return -BMI_ENOPROTOOPT;
        }
        slots_[static_cast<std::size_t>(d - methods.data())]->allowed = true;
    }

    if ((params.flags & BMI_INIT_SERVER) && same_node_allowed())
        same_node_ = std::make_shared<method::kit::SameNodeTickets>();
    for (auto listen : support::split_address_list(params.listen)) {
        auto parts = support::split_scheme(listen);
        if (!parts) return -BMI_EINVAL;
        int rc = 0;
        MethodSlot* slot = slot_for_scheme(parts->scheme, rc);
        if (slot == nullptr) return rc;
        if (slot->active.load()) return -BMI_EINVAL;  // two listen addresses for one method
        // Listening on ib:// answers ib:// for the listen address too (BMI_GET_METH_ADDR).
        slot->listen_scheme = std::string(parts->scheme);
        rc = activate(slot->index, method_config(*slot, method::canonical_address(listen)));
        if (rc != 0) return rc;
    }
    if (int rc = start_allocated_methods(); rc != 0) return rc;
    if ((params.flags & BMI_INIT_SERVER) && params.listen.empty() && !allocation_.allocated())
        return -BMI_EINVAL;
    if (same_node_) reserve_same_node_listener();
    return 0;
}

void MethodSet::close_all() {
    direct_index_.store(-1);
    wait_point_.set_direct(-1);
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        wait_point_.remove_fd(slot->method->wait_fd());
        slot->method.reset();
    }
}

method::Config MethodSet::method_config(const MethodSlot& slot, std::string_view listen) const {
    method::Config config;
    config.listen_address = std::string(listen);
    config.flags = flags_;
    config.dialect = dialect_;
    config.unexpected_limit = settings_.number(support::SettingId::unexpected_limit);
    config.settings = settings_;
    config.key = allocation_.key();
    config.allocated = allocation_.allocated();
    config.orangefs_trusted_build = dialect_ == method::ApiDialect::orangefs &&
                                    orangefs_trusted_build();
    for (const auto& plane : allocation_.planes())
        if (support::planes::to_string(plane.type) == slot.descriptor->scheme)
            config.planes.push_back(plane);
    // The method that answers same-node questions hands out the offers.
    if (!listen.empty() && slot.descriptor->ask_same_node != nullptr) config.same_node = same_node_;
    return config;
}

int MethodSet::start_allocated_methods() {
    for (const auto& plane : allocation_.planes()) {
        int rc = 0;
        MethodSlot* slot = slot_for_scheme(support::planes::to_string(plane.type), rc);
        if (slot == nullptr) {
            BMI_WARN("allocation %s is for %s, which this instance does not run (not compiled "
                     "in, or left out of its method list)",
                     plane.allocation_id.c_str(),
                     std::string(support::planes::to_string(plane.type)).c_str());
            return rc;
        }
        if (!(flags_ & BMI_INIT_SERVER) || slot->active.load()) continue;
        // A server listens where its allocation says: tcp on the planes' addresses and ports
        // (the method reads its planes), shm (and ofi's shm) under the allocation's id.
        std::string listen;
        if (plane.type == support::planes::PlaneType::shm) listen = "shm://" + plane.allocation_id;
        if (plane.type == support::planes::PlaneType::ofi) {
            if (method::ofi::socket_addressed(plane.ofi_provider)) {
                BMI_WARN("allocation %s: an ofi+%s server needs a listen address "
                         "(ofi+%s://host:port); the plane names only the provider",
                         plane.allocation_id.c_str(), plane.ofi_provider.c_str(),
                         plane.ofi_provider.c_str());
                return -BMI_EINVAL;
            }
            // The other providers put the endpoint where they like, in the plane's domain.
            listen = plane.ofi_provider == "shm"
                         ? "ofi+shm://" + plane.allocation_id
                         : "ofi+" + plane.ofi_provider + "://" + plane.ofi_domain;
        }
        if (plane.type == support::planes::PlaneType::verbs) {
            BMI_WARN("allocation %s: a verbs server needs a listen address for its bootstrap "
                     "(verbs://%s:%d/host:port); the plane names only the device",
                     plane.allocation_id.c_str(), plane.device.c_str(), plane.device_port);
            return -BMI_EINVAL;
        }
        if (rc = activate(slot->index, method_config(*slot, listen)); rc != 0) return rc;
    }
    return 0;
}

int MethodSet::start_client(MethodSlot& slot) {
    if (slot.active.load()) return 0;
    return activate(slot.index, method_config(slot, ""));
}

int MethodSet::activate(int index, const method::Config& config) {
    support::MutexLock activation(activation_mutex_);
    MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
    if (slot.active.load()) return 0;
    std::unique_ptr<method::Method> created;
    int rc = slot.descriptor->create(config, *slot.sink, created);
    if (rc != 0) {
        BMI_LOG(error, "%.*s: start failed (%d)", static_cast<int>(slot.descriptor->name.size()),
                slot.descriptor->name.data(), rc);
        return rc;
    }
    bool first = true;
    for (auto& other : slots_) first = first && !other->active.load();
    {
        support::MutexLock lock(slot.lock);
        slot.method = std::move(created);
        slot.native_lists = slot.method->native_lists() && !emulate_lists_;
        if (trusted_)
            (void)slot.method->set_info(nullptr, method::info_trusted_sources, &*trusted_);
        rc = wait_point_.add_fd(slot.method->wait_fd());
        if (rc != 0) {
            slot.method.reset();
            return rc;
        }
        // One method alone: sleep on its own epoll set (no nesting, one epoll_wait per
        // wake-up). A second method brings back the shared set, which holds every fd.
        // Both of our fds must be in the method's set: without the timerfd a sleep there
        // would never time out.
        if (first && slot.method->accept_wake_fd(wait_point_.wake_fd(), WaitPoint::wake_tag) &&
            slot.method->accept_wake_fd(wait_point_.timer_fd(), WaitPoint::timer_tag)) {
            direct_index_.store(index);
            wait_point_.set_direct(slot.method->wait_fd());
        } else if (!first) {
            direct_index_.store(-1);
            wait_point_.set_direct(-1);
        }
    }
    {
        support::MutexLock lock(records_mutex_);
        if (!methods_string_.empty()) methods_string_ += ',';
        methods_string_ += slot.descriptor->name;
    }
    slot.active.store(true);
    active_count_.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

MethodSlot* MethodSet::slot_for_scheme(std::string_view scheme, int& error) const {
    for (auto& slot : slots_) {
        if (slot->descriptor->scheme != scheme &&
            (slot->descriptor->alias_scheme.empty() || slot->descriptor->alias_scheme != scheme))
            continue;
        if (!slot->allowed) {
            error = -BMI_ENOPROTOOPT;
            return nullptr;
        }
        return slot.get();
    }
    error = -BMI_ENOPROTOOPT;
    return nullptr;
}

void* MethodSet::allocate_memory(int index, bmi_size_t size) {
    if (size < 0) return nullptr;
    // A method with registration needs (verbs) or memory its peers map (shm) hands out
    // memory it has prepared.
    {
        MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
        support::MutexLock lock(slot.lock);
        if (slot.method)
            if (void* prepared = slot.method->mem_alloc(size); prepared != nullptr) return prepared;
    }
    // Cache-line alignment helps every method's copies.
    void* buffer = nullptr;
    std::size_t bytes = static_cast<std::size_t>(size > 0 ? size : 1);
    if (posix_memalign(&buffer, 64, bytes) != 0) return nullptr;
    support::MutexLock lock(records_mutex_);
    malloc_owned_.insert(buffer);
    return buffer;
}

int MethodSet::free_memory(void* buffer) {
    {
        support::MutexLock lock(records_mutex_);
        if (malloc_owned_.erase(buffer) != 0) {
            std::free(buffer);
            return 0;
        }
    }
    // Memory a method prepared: ask every method, since an application may free through an
    // address of another method than the one it allocated with.
    for (auto& slot : slots_) {
        support::MutexLock lock(slot->lock);
        if (slot->method && slot->method->mem_free(buffer)) return 0;
    }
    BMI_LOG(error, "BMI_memfree: %p was not allocated by BMI_memalloc or is already freed", buffer);
    return -BMI_EINVAL;
}

std::string MethodSet::listen_addresses() {
    std::string out;
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        std::string one = slot->method->listen_address();
        if (one.empty()) continue;
        if (!slot->listen_scheme.empty() && slot->listen_scheme != slot->descriptor->scheme)
            one = slot->listen_scheme + one.substr(slot->descriptor->scheme.size());
        if (!out.empty()) out += ',';
        out += one;
    }
    return out;
}

const char* MethodSet::listen_string() {
    std::string text = listen_addresses();
    support::MutexLock lock(records_mutex_);
    // Keep the old storage when nothing changed, so earlier pointers stay valid.
    if (listen_string_ != text) listen_string_ = std::move(text);
    return listen_string_.c_str();
}

const char* MethodSet::method_names() {
    support::MutexLock lock(records_mutex_);
    return methods_string_.c_str();
}

}  // namespace bmi::core
