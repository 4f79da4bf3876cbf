// SPDX-License-Identifier: LGPL-2.1-or-later
// The methods of one instance: a slot per compiled method, which of them BMI_initialize
// allowed, when each starts (a server's listen addresses and allocation at initialize, any
// other at its first lookup), the Config each gets, and the memory BMI_memalloc hands out for
// them. The settings and the allocation in force are read here, once.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "bmi/core/instance_allocation.hpp"
#include "bmi/core/instance_types.hpp"
#include "bmi/core/wait_point.hpp"
#include "methods/method.hpp"
#include "support/keys/trusted_sources.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

// OrangeFS's trusted-connection accessors are linked into this process (trusted_connection.cpp).
bool orangefs_trusted_build();

struct MethodSlot {
    const method::Descriptor* descriptor = nullptr;
    int index = 0;
    bool allowed = false;             // named in BMI_initialize's method list (or list empty)
    std::atomic<bool> active{false};  // method created; set once, never cleared before teardown
    // Held around every call into method; biased like the state lock (instance.hpp).
    support::Mutex lock{support::Mutex::Bias::first_thread};
    std::unique_ptr<method::Method> method BMI_PT_GUARDED_BY(lock);
    method::Sink* sink = nullptr;  // the instance's, for this slot; outlives method
    bool native_lists = false;
    std::string listen_scheme;  // the listen address's scheme as given (alias or own)
};

class MethodSet {
public:
    // The Sink a slot's method reports through, made once per slot and kept by the caller.
    using MakeSink = std::function<method::Sink&(int index)>;

    explicit MethodSet(WaitPoint& wait_point) : wait_point_(wait_point) {}
    MethodSet(const MethodSet&) = delete;
    MethodSet& operator=(const MethodSet&) = delete;

    // Reads the settings and the allocation; 0 or -BMI_E* (a bad setting or allocation).
    int configure(const InitParams& params);
    // Then makes the slots and starts a server's methods (listen addresses, then allocated
    // planes); 0 or -BMI_E* (unknown method, listen address in use, ...).
    int start(const InitParams& params, const MakeSink& make_sink);
    // Closes every method; ops still pending are the method's to complete or drop.
    void close_all();

    std::span<const std::unique_ptr<MethodSlot>> slots() const { return slots_; }
    MethodSlot& slot(int index) const { return *slots_[static_cast<std::size_t>(index)]; }
    // The allowed slot of scheme (its own or its alias), or nullptr and error set.
    MethodSlot* slot_for_scheme(std::string_view scheme, int& error) const;
    const InstanceAllocation& allocation() const { return allocation_; }
    // Starts slot's method for a client (no listen address); 0 if it runs already.
    int start_client(MethodSlot& slot);
    // The one active method the wait point sleeps on directly (see Method::accept_wake_fd),
    // or -1 while zero or several methods are active.
    int direct_index() const { return direct_index_.load(); }
    // How many methods have started (they stay until close_all).
    int active_count() const { return active_count_.load(std::memory_order_relaxed); }

    const support::Settings& settings() const { return settings_; }
    int flags() const { return flags_; }
    method::ApiDialect dialect() const { return dialect_; }

    // BMI_TRUSTED_CONNECTION with OrangeFS's server configuration (trusted_connection.cpp).
    int trust_sources(void* config);
    // memalloc's memory for slot index's method: prepared by the method, or malloc'd here;
    // not yet zeroed.
    void* allocate_memory(int index, bmi_size_t size);
    // 0, or -BMI_EINVAL for memory no allocate_memory() handed out (or already freed).
    int free_memory(void* buffer);

    // The listen addresses of all methods, comma separated ("" for a client).
    std::string listen_addresses();
    // The same, kept until the next call (BMI_GET_METH_ADDR with addr 0).
    const char* listen_string();
    // Names of the active methods, comma separated; valid until another method starts
    // (BMI_TRANSPORT_METHODS_STRING).
    const char* method_names();

    // same_node.cpp (doc/architecture.md, "Same-node peers").
    // A lookup of `address` through tcp_slot: if it names a libbmi server on this node that
    // offers shm, the shm slot (started) and the hint for its lookup. Blocks for the tcp
    // method's question; call without locks.
    struct SameNodeChoice {
        int shm_index = -1;
        method::SameNodeLookup hint;
    };
    std::optional<SameNodeChoice> same_node_route(const MethodSlot& tcp_slot,
                                                  std::string_view address);
    // A server whose tcp side was asked for an offer starts its same-node listener here, on
    // the next pass of a test call, outside every method lock. Inline, since every test call
    // asks and nobody has asked almost always.
    void serve_same_node_if_asked() {
        if (same_node_ && same_node_->requested()) serve_same_node();
    }
    // A client's shm connect that must first ask its same-node server for a new ticket files
    // the question (kit::SameNodeRenewals) in the post that connects; that post asks here once
    // it holds no lock, and shm connects with the answer. Inline: every post calls it.
    void renew_same_node_if_asked() {
        if (renewals_->pending()) renew_same_node_routes();
    }

private:
    void serve_same_node();
    void renew_same_node_routes();
    int activate(int index, const method::Config& config);
    // The one place a method's Config is built, for a server's listen address and for a
    // client's first lookup ("" listen) alike, so both carry the same settings, key and planes.
    method::Config method_config(const MethodSlot& slot, std::string_view listen) const;
    // Checks every allocated plane has a method here, then starts each allocated method of a
    // server that its listen string did not already start.
    int start_allocated_methods();
    // Whether same-node offers and lookups may happen at all: same_node_shm on, no
    // allocation (planes decide where traffic goes), encryption not required, shm compiled.
    bool same_node_allowed() const;
    MethodSlot* shm_slot() const;
    // At a server's start: the listening socket its tcp side's offers will name, bound now so
    // that clients find it; without it the tcp side offers nothing.
    void reserve_same_node_listener();

    WaitPoint& wait_point_;
    int flags_ = 0;
    method::ApiDialect dialect_ = method::ApiDialect::orangefs;
    support::Settings settings_{method::all_settings()};  // read once in configure()
    bool emulate_lists_ = false;  // emulate_lists=1: pack even for native methods
    std::vector<std::unique_ptr<MethodSlot>> slots_;
    support::Mutex activation_mutex_;  // serializes method creation
    // BMI_TRUSTED_CONNECTION's sources, handed to every method as it starts.
    std::optional<support::keys::TrustedSources> trusted_ BMI_GUARDED_BY(activation_mutex_);
    std::atomic<int> direct_index_{-1};
    std::atomic<int> active_count_{0};
    InstanceAllocation allocation_;
    // A tcp server's same-node offers (methods/kit/same_node.hpp); null when it makes none.
    std::shared_ptr<method::kit::SameNodeTickets> same_node_;
    unsigned same_node_port_ = 0;  // the tcp port same_node_'s listener is reserved for
    // A client's same-node routes waiting to be asked again (renew_same_node_if_asked).
    std::shared_ptr<method::kit::SameNodeRenewals> renewals_ =
        std::make_shared<method::kit::SameNodeRenewals>();

    support::Mutex records_mutex_;  // held only for the three records below
    std::string methods_string_ BMI_GUARDED_BY(records_mutex_);
    std::string listen_string_ BMI_GUARDED_BY(records_mutex_);
    // Buffers allocate_memory() malloc'd itself (methods track their own), so that
    // BMI_memfree of a foreign or already freed pointer is refused, not passed to free().
    std::unordered_set<void*> malloc_owned_ BMI_GUARDED_BY(records_mutex_);
};

}  // namespace bmi::core
