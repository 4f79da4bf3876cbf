// SPDX-License-Identifier: LGPL-2.1-or-later
// The info options (BMI_set_info, BMI_get_info): the control layer answers its own, and hands
// every other to the addressed method, or to each active one for addr 0.
#include "bmi/core/instance.hpp"

namespace bmi::core {

int Instance::set_info(BMI_addr_t addr, int option, void* arg) {
    switch (option) {
        case BMI_DROP_ADDR:
            return addresses_.drop(addr);
        case BMI_INC_ADDR_REF:
        case BMI_DEC_ADDR_REF:
            return addresses_.change_reference(addr, option);
        case BMI_TRUSTED_CONNECTION:
            return methods_.trust_sources(arg);
        case BMI_FORCEFUL_CANCEL_MODE:
        case BMI_OPTIMISTIC_BUFFER_REG:
            // Accepted and ignored: a cancel closes a connection only when its operation moved
            // data (doc/architecture.md), and memory needs no registration.
            return 0;
        default:
            break;
    }
    // Method-specific options: to the addressed method, or to every active one for addr 0.
    std::shared_ptr<method::Peer> peer;
    int only = -1;
    if (addr != 0 && !addresses_.peer_of(addr, peer, only)) return -BMI_EINVAL;
    int rc = -BMI_ENOSYS;
    for (auto& slot : methods_.slots()) {
        if (!slot->active.load() || (only >= 0 && slot->index != only)) continue;
        support::MutexLock lock(slot->lock);
        int one = slot->method->set_info(peer.get(), option, arg);
        if (one != -BMI_ENOSYS) rc = one;
    }
    return rc;
}

int Instance::get_info(BMI_addr_t addr, int option, void* arg) {
    if (arg == nullptr && option != BMI_CHECK_INIT) return -BMI_EINVAL;
    std::shared_ptr<method::Peer> peer;
    int only = -1;
    if (addr != 0 && !addresses_.peer_of(addr, peer, only)) return -BMI_EINVAL;
    switch (option) {
        case BMI_CHECK_INIT:
            return 0;
        case BMI_CHECK_MAXSIZE:
        case BMI_GET_UNEXP_SIZE: {
            bmi_size_t best = -1;
            for (auto& slot : methods_.slots()) {
                if (!slot->active.load() || (only >= 0 && slot->index != only)) continue;
                support::MutexLock lock(slot->lock);
                bmi_size_t value = option == BMI_CHECK_MAXSIZE ? slot->method->max_message_size()
                                                               : slot->method->unexpected_limit();
                // A method may know a smaller limit for one peer (tcp: a legacy peer's 16 MiB;
                // ofi: the unexpected limit its handshake stated).
                bmi_size_t for_peer = 0;
                if (peer && slot->method->get_info(peer.get(), option, &for_peer) == 0)
                    value = for_peer;
                // The safe answer across several methods is the smallest.
                if (best < 0 || value < best) best = value;
            }
            if (best < 0) return -BMI_ENODEV;
            *static_cast<int*>(arg) = best > 0x7fffffff ? 0x7fffffff : static_cast<int>(best);
            return 0;
        }
        case BMI_GET_METH_ADDR:
            if (peer) {
                *static_cast<void**>(arg) = peer.get();
            } else {
                *static_cast<const char**>(arg) = methods_.listen_string();
            }
            return 0;
        case BMI_TRANSPORT_METHODS_STRING:
            *static_cast<const char**>(arg) = methods_.method_names();
            return 0;
        case BMI_ADDRESS_COUNT:
            // How many addresses the instance holds: a long-running server watches that it does
            // not grow with every client it ever served.
            *static_cast<int*>(arg) = addresses_.count();
            return 0;
        case BMI_UNEXPECTED_QUOTA_USE:
            return unexpected_quota_use(*static_cast<BMI_unexpected_quota_use*>(arg));
        case BMI_DROP_ADDR_QUERY: {
            // What would decide a drop now: no reference, and the method says the peer is gone.
            if (!peer) return -BMI_EINVAL;
            const bool unreferenced = addresses_.unreferenced(addr);
            MethodSlot& slot = methods_.slot(only);
            support::MutexLock lock(slot.lock);
            *static_cast<int*>(arg) = unreferenced && slot.method->peer_gone(*peer) ? 1 : 0;
            return 0;
        }
        default:
            break;
    }
    int rc = -BMI_ENOSYS;
    for (auto& slot : methods_.slots()) {
        if (!slot->active.load() || (only >= 0 && slot->index != only)) continue;
        support::MutexLock lock(slot->lock);
        int one = slot->method->get_info(peer.get(), option, arg);
        if (one != -BMI_ENOSYS) return one;
    }
    return rc;
}

int Instance::unexpected_quota_use(BMI_unexpected_quota_use& out) {
    inbox_.usage(out);
    out.blocked_peers = 0;
    // Only a method knows which of its peers it stopped reading; each adds its own count
    // (a method without the option answers -BMI_ENOSYS and adds nothing).
    for (auto& slot : methods_.slots()) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        (void)slot->method->get_info(nullptr, BMI_UNEXPECTED_QUOTA_USE, &out);
    }
    return 0;
}

}  // namespace bmi::core
