// SPDX-License-Identifier: LGPL-2.1-or-later
// Local memory registration, for providers that need it (FI_MR_LOCAL: verbs through ofi_rxm).
// Regions from BMI_memalloc are registered once, when allocated, and every transfer inside one
// uses that registration; any other memory is registered for one operation and deregistered
// when it ends, since we cannot see the application free it (as methods/verbs does).
#pragma once

#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <map>

namespace bmi::method::ofi {

class Registrations {
public:
    Registrations() = default;
    ~Registrations() { clear(); }
    Registrations(const Registrations&) = delete;
    Registrations& operator=(const Registrations&) = delete;

    // Registers from now on in `domain`; until then (or for a provider that needs no local
    // registration) nothing is registered and every descriptor is null.
    void use(fid_domain* domain) { domain_ = domain; }
    bool active() const { return domain_ != nullptr; }

    // The descriptor for [data, data + size), to send from (`send`) or receive into: a
    // BMI_memalloc region's, or that of a registration of its own in `own`, which the caller
    // gives back with release(). 0 or -BMI_E* (-BMI_ENOMEM: the provider refused, e.g.
    // read-only memory).
    int acquire(void* data, std::size_t size, bool send, void*& desc, fid_mr*& own);
    static void release(fid_mr*& own);

    // BMI_memalloc / BMI_memfree: nullptr when not active (the control layer allocates then);
    // free returns false for memory it did not allocate.
    void* allocate(std::size_t size);
    bool free(void* data);
    // Deregisters and frees every region: before the domain closes.
    void clear();

private:
    fid_domain* domain_ = nullptr;
    std::map<std::uintptr_t, std::pair<std::size_t, fid_mr*>> regions_;  // start -> size, mr
};

}  // namespace bmi::method::ofi
