// SPDX-License-Identifier: LGPL-2.1-or-later
// The method control layer: one independent BMI instance. The C API drives one global instance;
// the C++ API may create any number side by side (a server and a client in one test).
//
// An Instance composes its parts and runs the calls that span them (post, cancel, the info
// options): the methods (MethodSet), the addresses (AddressBook), the unexpected messages
// (UnexpectedInbox), the operations and contexts (OpTable) and the waiting code (Waiter,
// sleeping on the WaitPoint).
//
// Locking (see also methods/method.hpp):
//  - state_mutex_ guards the bookkeeping of the address book, the inbox and the op table,
//    which each name it as their state lock. It is held only for bookkeeping, never across a
//    method call.
//  - Each method slot has its own mutex, held around every call into that method; a method
//    calls back through Sink, which takes state_mutex_ (order: method -> state, never reverse).
//  - An Operation is freed only after it completed and was reported by a test call, so holding
//    its method's mutex (which blocks its completion) pins it; cancel relies on that.
//  - Sleeping is delegated to WaitPoint, which never holds either kind of lock.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bmi/core/address_book.hpp"
#include "bmi/core/instance_types.hpp"
#include "bmi/core/method_set.hpp"
#include "bmi/core/op_table.hpp"
#include "bmi/core/unexpected_inbox.hpp"
#include "bmi/core/wait_point.hpp"
#include "bmi/core/waiter.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

class Instance {
public:
    static constexpr int max_contexts = OpTable::max_contexts;

    // 0 and out set, or -BMI_E* (unknown method, listen address in use, ...).
    static int create(const InitParams& params, std::unique_ptr<Instance>& out);
    // Finalizes: cancels every pending op, closes every method, frees undelivered memory.
    ~Instance();
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    int open_context(bmi_context_id& out) { return ops_.open_context(out); }
    // Ops still pending on the context are cancelled and freed once the method lets go.
    int close_context(bmi_context_id context);

    // 0 posted (id set), 1 completed immediately (actual_size set), or -BMI_E*.
    int post(const PostRequest& request, bmi_op_id_t& id, bmi_size_t* actual_size);

    // The test family (Waiter): outputs as in bmi.h; idle waits only while nothing is
    // available.
    int test(bmi_op_id_t id, bmi_context_id context, int max_idle_ms, int& outcount,
             Completion& out) {
        return waiter_.test(id, context, max_idle_ms, outcount, out);
    }
    int testsome(std::span<const bmi_op_id_t> ids, bmi_context_id context, int max_idle_ms,
                 int& outcount, std::span<int> indices, std::span<Completion> out) {
        return waiter_.testsome(ids, context, max_idle_ms, outcount, indices, out);
    }
    int testcontext(bmi_context_id context, int max_idle_ms, int& outcount,
                    std::span<Completion> out) {
        return waiter_.testcontext(context, max_idle_ms, outcount, out);
    }
    int testunexpected(int max_idle_ms, int& outcount, std::span<UnexpectedMessage> out,
                       std::optional<std::uint8_t> msg_class = std::nullopt) {
        return waiter_.testunexpected(max_idle_ms, outcount, out, msg_class);
    }

    int cancel(bmi_op_id_t id, bmi_context_id context);

    int addr_lookup(std::string_view id_string, BMI_addr_t& out) {
        return addresses_.lookup(id_string, out);
    }
    // Pointer valid until the address is dropped or the next rev lookup of it; nullptr if bad.
    const char* rev_lookup(BMI_addr_t addr) { return addresses_.rev_lookup(addr); }
    const char* rev_lookup_unexpected(BMI_addr_t addr) {
        return addresses_.rev_lookup_unexpected(addr);
    }
    int query_addr_range(BMI_addr_t addr, std::string_view id_string, int netmask) {
        return addresses_.query_range(addr, id_string, netmask);
    }

    void* memalloc(BMI_addr_t addr, bmi_size_t size);
    int memfree(BMI_addr_t, void* buffer) { return methods_.free_memory(buffer); }
    int unexpected_free(void* buffer);

    // instance_info.cpp
    int set_info(BMI_addr_t addr, int option, void* arg);
    int get_info(BMI_addr_t addr, int option, void* arg);
    // BMI_UNEXPECTED_QUOTA_USE: bytes used and limit from the inbox, blocked peers from each
    // method.
    int unexpected_quota_use(BMI_unexpected_quota_use& out);

    // The listen addresses of all methods, comma separated ("" for a client).
    std::string listen_addresses() { return methods_.listen_addresses(); }

private:
    class SlotSink;

    explicit Instance(int& error);
    // Cancels every pending op for which pick(op) is true (no locks held by the caller).
    template <class Pick>
    void cancel_pending(Pick&& pick);

    // Declared in the order they are built: each part gets the ones before it. Biased: most
    // callers post and test from one thread (support/sync/mutex.hpp).
    support::Mutex state_mutex_{support::Mutex::Bias::first_thread};
    WaitPoint wait_point_;
    MethodSet methods_;
    AddressBook addresses_;
    UnexpectedInbox inbox_;
    OpTable ops_;
    Waiter waiter_;
    std::vector<std::unique_ptr<SlotSink>> sinks_;  // one per method slot
};

}  // namespace bmi::core
