// SPDX-License-Identifier: LGPL-2.1-or-later
// The method control layer: one independent BMI instance. The C API drives one global instance;
// the C++ API may create any number side by side (a server and a client in one test).
//
// Locking (see also methods/method.hpp):
//  - state_mutex_ guards the op id table, contexts and their completion queues, the unexpected
//    queue and the reference list. It is held only for bookkeeping, never across a method call.
//  - Each method slot has its own mutex, held around every call into that method; a method
//    calls back through Sink, which takes state_mutex_ (order: method -> state, never reverse).
//  - An Operation is freed only after it completed and was reported by a test call, so holding
//    its method's mutex (which blocks its completion) pins it; cancel relies on that.
//  - Sleeping is delegated to WaitPoint, which never holds either kind of lock.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bmi/core/reference_list.hpp"
#include "bmi/core/wait_point.hpp"
#include "methods/method.hpp"
#include "support/id_generator/id_generator.hpp"
#include "support/keys/trusted_sources.hpp"
#include "support/op_queue/op_queue.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

struct InitParams {
    std::string method_list;  // "bmi_tcp,bmi_shm"; empty: every compiled method
    std::string listen;       // "tcp://0.0.0.0:3334,shm://srv"; empty: client only
    int flags = 0;            // BMI_INIT_SERVER | BMI_TCP_BIND_SPECIFIC | BMI_AUTO_REF_COUNT
    // "unexpected_quota=64M,shm_ring_slots=128": keys of the settings table
    // (support/settings/setting_table.hpp); each overrides its environment variable.
    std::string options;
    // The allocation in the text form of doc/planes.md, from the C++ API; "" leaves it to the
    // allocation settings (BMI_ALLOCATION, BMI_ALLOCATION_FILE, BMI_ALLOCATION_ID).
    std::string allocation;
    // The API this instance serves (bmi.h of OrangeFS or of the standalone library).
    method::ApiDialect dialect = method::ApiDialect::orangefs;
};

// What a post call asks for. Exactly one of (buffer) or (list) is used.
struct PostRequest {
    method::OpKind kind = method::OpKind::send;
    BMI_addr_t addr = 0;
    void* buffer = nullptr;  // contiguous; for sends never written
    const void* const* list = nullptr;
    const bmi_size_t* sizes = nullptr;
    int list_count = 0;  // 0: contiguous
    bmi_size_t size = 0;  // contiguous size, or the list total the caller announced
    bmi_msg_tag_t tag = 0;
    std::uint8_t msg_class = 0;  // send_unexpected only: the standalone dialect's class
    void* user_ptr = nullptr;
    bmi_context_id context = 0;
};

struct Completion {
    bmi_op_id_t id = 0;
    int error = 0;
    bmi_size_t actual_size = 0;
    void* user_ptr = nullptr;
};

struct UnexpectedMessage {
    int error = 0;
    BMI_addr_t addr = 0;
    void* buffer = nullptr;
    bmi_size_t size = 0;
    bmi_msg_tag_t tag = 0;
    std::uint8_t msg_class = 0;
};

class Instance {
public:
    static constexpr int max_contexts = 64;

    // 0 and out set, or -BMI_E* (unknown method, listen address in use, ...).
    static int create(const InitParams& params, std::unique_ptr<Instance>& out);
    // Finalizes: cancels every pending op, closes every method, frees undelivered memory.
    ~Instance();
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    int open_context(bmi_context_id& out);
    // Ops still pending on the context are cancelled and freed once the method lets go.
    int close_context(bmi_context_id context);

    // 0 posted (id set), 1 completed immediately (actual_size set), or -BMI_E*.
    int post(const PostRequest& request, bmi_op_id_t& id, bmi_size_t* actual_size);

    // The test family: outputs as in bmi.h; idle waits only while nothing is available.
    int test(bmi_op_id_t id, bmi_context_id context, int max_idle_ms, int& outcount,
             Completion& out);
    int testsome(std::span<const bmi_op_id_t> ids, bmi_context_id context, int max_idle_ms,
                 int& outcount, std::span<int> indices, std::span<Completion> out);
    // A waiting testcontext also returns, with outcount 0, once for each unexpected message
    // no test call has reported yet.
    int testcontext(bmi_context_id context, int max_idle_ms, int& outcount,
                    std::span<Completion> out);
    // msg_class: only messages of that class (the standalone dialect's _class calls);
    // nullopt: every class (OrangeFS's BMI_testunexpected, which knows no classes).
    int testunexpected(int max_idle_ms, int& outcount, std::span<UnexpectedMessage> out,
                       std::optional<std::uint8_t> msg_class = std::nullopt);

    int cancel(bmi_op_id_t id, bmi_context_id context);

    int addr_lookup(std::string_view id_string, BMI_addr_t& out);
    // Pointer valid until the address is dropped or the next rev lookup of it; nullptr if bad.
    const char* rev_lookup(BMI_addr_t addr);
    const char* rev_lookup_unexpected(BMI_addr_t addr);
    int query_addr_range(BMI_addr_t addr, std::string_view id_string, int netmask);

    void* memalloc(BMI_addr_t addr, bmi_size_t size);
    int memfree(BMI_addr_t addr, void* buffer);
    int unexpected_free(void* buffer);

    int set_info(BMI_addr_t addr, int option, void* arg);
    // BMI_TRUSTED_CONNECTION with OrangeFS's server configuration (trusted_connection.cpp).
    int trust_sources(void* config);
    int get_info(BMI_addr_t addr, int option, void* arg);
    // BMI_UNEXPECTED_QUOTA_USE: bytes used and limit from here, blocked peers from each method.
    int unexpected_quota_use(BMI_unexpected_quota_use& out);

    // The listen addresses of all methods, comma separated ("" for a client).
    std::string listen_addresses();
    // Names of the active methods, comma separated.
    std::string active_methods();

private:
    struct MethodSlot;
    class SlotSink;
    struct Context {
        bool open = false;
        support::OpQueue<method::Operation, method::SafeHook, &method::Operation::core_hook>
            completed;
    };

    Instance(int& error);
    int activate(int index, const method::Config& config);
    // The one place a method's Config is built, for a server's listen address and for a
    // client's first lookup ("" listen) alike, so both carry the same settings, key and planes.
    method::Config method_config(const MethodSlot& slot, std::string_view listen) const;

    // instance_allocation.cpp: the allocation in force (doc/planes.md), read once by create():
    // the planes, the key (from the allocation or key_file), and what cannot be enforced here.
    int take_allocation(std::string_view program_text);
    // Checks every allocated plane has a method here, then starts each allocated method of a
    // server that its listen string did not already start.
    int start_allocated_methods();
    // With an allocation in force, a method without an allocated plane reaches nobody.
    bool scheme_reachable(std::string_view scheme) const;
    MethodSlot* slot_for_scheme(std::string_view scheme, int& error);
    void progress_all();
    // The clock of one wait (wait_for), read only once a sleep is near: a wait that a method's
    // spin ends reads none (a reading is a sizeable part of an shm message; figures in
    // doc/perf/code-figures.md).
    struct SleepClock {
        int max_idle_ms = 0;
        WaitPoint::Clock::time_point now{};
        WaitPoint::Clock::time_point deadline{};  // set by the first reading
        bool fresh = false;                       // now was read in this round of the wait
        void read() {
            now = WaitPoint::Clock::now();
            if (deadline == WaitPoint::Clock::time_point{})
                deadline = now + std::chrono::milliseconds(max_idle_ms);
            fresh = true;
        }
    };
    // The sleep protocol of methods/method.hpp (before_sleep, then sleep_in_read): true if a
    // method moved something instead. Reads the clock before offering a sleep in a read.
    bool before_sleep_all(SleepClock& clock);
    void after_wake_all();
    // Run by the thread that slept, with the ready events of the direct-mode method, if any.
    void wake_all(std::span<const epoll_event> events);
    template <class Ready>
    void wait_for(int max_idle_ms, Ready&& ready);
    // Records the calling thread: once a second thread posts, cancels or waits, no method
    // sleeps in a read (Method::sleep_in_read), which only the first thread could end.
    void note_caller();

    // Sink callbacks (method mutex held by the caller).
    void on_complete(method::Operation& op, int error);
    BMI_addr_t on_register_peer(int method_index, const std::shared_ptr<method::Peer>& peer);
    void* on_alloc_unexpected(const method::Peer& peer, bmi_size_t size);
    // Takes back the charge of an unexpected buffer (state_mutex_ held); false if unknown.
    bool uncharge_unexpected(void* buffer) BMI_REQUIRES(state_mutex_);
    void on_deliver_unexpected(int method_index, const std::shared_ptr<method::Peer>& peer,
                               void* buffer, bmi_size_t size, bmi_msg_tag_t tag,
                               std::uint8_t msg_class);

    // Sink::peer_gone: files the peer's address for drop_gone_peers.
    void on_peer_gone(const method::Peer& peer);
    // Puts entry on gone_peers_ unless it is there already (state_mutex_ held).
    void file_gone_locked(AddressEntry& entry) BMI_REQUIRES(state_mutex_);
    // Drops addr if nothing holds it any more: no reference, no unreported unexpected
    // message, and its method says the peer is gone. No lock held by the caller.
    void drop_if_gone(BMI_addr_t addr);
    // Runs drop_if_gone for every address filed by on_peer_gone (cheap when there is none).
    void drop_gone_peers();

    // Copies a post's request into op (everything but the peer).
    static void fill_request(method::Operation& op, const PostRequest& request);
    // Sets up op's segments for a list post, natively or packed; 0, or -BMI_ENOMEM.
    static int fill_lists(method::Operation& op, const PostRequest& request, bool native_lists);
    // Puts a completed op on its context's queue; false (and its id forgotten) if the context
    // was closed meanwhile, so the caller frees it (state_mutex_ held).
    bool queue_completed_locked(method::Operation& op) BMI_REQUIRES(state_mutex_);
    // Removes a completed op from its context and frees it (state_mutex_ held).
    Completion reap_locked(method::Operation& op) BMI_REQUIRES(state_mutex_);
    void free_op(method::Operation* op);
    method::Operation* find_op_locked(bmi_op_id_t id, bmi_context_id context)
        BMI_REQUIRES(state_mutex_);
    bool context_valid_locked(bmi_context_id context) const BMI_REQUIRES(state_mutex_);
    // The peer behind addr and its method's index, copied under the state lock so the caller
    // may use them after it (the shared_ptr keeps the peer alive); false for an unknown addr.
    bool peer_of(BMI_addr_t addr, std::shared_ptr<method::Peer>& peer, int& method_index);
    // address_lifetime.cpp: BMI_DROP_ADDR, and BMI_INC_ADDR_REF / BMI_DEC_ADDR_REF.
    int drop_address(BMI_addr_t addr);
    int change_reference(BMI_addr_t addr, int option);
    // memalloc's memory, from the address's method or malloc, not yet zeroed.
    void* allocate_for(BMI_addr_t addr, bmi_size_t size);
    // Asks the address's method for a string about the peer and keeps it in entry->*store,
    // whose c_str() is returned (nullptr for an unknown address).
    const char* peer_string(BMI_addr_t addr,
                            std::string (method::Method::*describe)(const method::Peer&) const,
                            std::string AddressEntry::*store);
    // Cancels every pending op for which pick(op) is true (no locks held by the caller).
    template <class Pick>
    void cancel_pending(Pick&& pick);

    int flags_ = 0;
    method::ApiDialect dialect_ = method::ApiDialect::orangefs;
    support::Settings settings_;  // read once in create(); never changed after
    bool emulate_lists_ = false;  // emulate_lists=1: pack even for native methods
    bmi_size_t unexpected_quota_ = 0;
    bmi_size_t unexpected_peer_share_ = 0;  // what one peer may hold of the quota
    std::vector<std::unique_ptr<MethodSlot>> slots_;
    support::Mutex activation_mutex_;  // serializes lazy method creation
    // BMI_TRUSTED_CONNECTION's sources, handed to every method as it starts.
    std::optional<support::keys::TrustedSources> trusted_ BMI_GUARDED_BY(activation_mutex_);
    // The one active method the wait point sleeps on directly (see Method::accept_wake_fd),
    // or -1 while zero or several methods are active.
    std::atomic<int> direct_index_{-1};
    WaitPoint wait_point_;
    std::atomic<std::thread::id> sole_caller_{};  // the first thread to post, cancel or wait
    std::atomic<bool> many_callers_{false};       // another one has since

    support::Mutex state_mutex_;
    support::IdGenerator op_ids_ BMI_GUARDED_BY(state_mutex_);
    std::array<Context, max_contexts> contexts_ BMI_GUARDED_BY(state_mutex_);
    // Every posted op that has not completed, linked through core_hook (it moves to its
    // context's completed queue on completion): close_context and finalize cancel these.
    support::OpQueue<method::Operation, method::SafeHook, &method::Operation::core_hook>
        pending_ BMI_GUARDED_BY(state_mutex_);
    std::deque<UnexpectedMessage> unexpected_ BMI_GUARDED_BY(state_mutex_);
    // Unexpected messages delivered so far, and how many of them a test call has reported
    // (testcontext's early return, or testunexpected emptying the queue).
    std::uint64_t unexpected_arrivals_ BMI_GUARDED_BY(state_mutex_) = 0;
    std::uint64_t unexpected_reported_ BMI_GUARDED_BY(state_mutex_) = 0;
    // Unexpected buffers handed out, with what each costs against the quota and whose it is.
    struct UnexpectedCharge {
        bmi_size_t cost = 0;
        std::uint64_t peer_serial = 0;  // method::Peer::serial of the sender
    };
    std::unordered_map<void*, UnexpectedCharge> unexpected_owned_ BMI_GUARDED_BY(state_mutex_);
    // What each peer's unexpected buffers cost while the application holds them, by peer
    // serial: the buffers may outlive the peer.
    std::unordered_map<std::uint64_t, bmi_size_t> unexpected_by_peer_
        BMI_GUARDED_BY(state_mutex_);
    // BMI_memalloc buffers the control layer allocated itself (methods track their own), so
    // that BMI_memfree of a foreign or already freed pointer is refused, not passed to free().
    std::unordered_set<void*> memalloc_owned_ BMI_GUARDED_BY(state_mutex_);
    bmi_size_t unexpected_bytes_ BMI_GUARDED_BY(state_mutex_) = 0;
    bool quota_warned_ BMI_GUARDED_BY(state_mutex_) = false;
    ReferenceList addresses_ BMI_GUARDED_BY(state_mutex_);
    // Addresses whose peers a method reported gone, waiting for drop_gone_peers (run by every
    // test call; OrangeFS runs its forget list in BMI_testunexpected). One entry per address
    // at most (AddressEntry::gone_queued).
    std::vector<BMI_addr_t> gone_peers_ BMI_GUARDED_BY(state_mutex_);
    std::atomic<bool> gone_pending_{false};        // gone_peers_ may be non-empty
    std::string methods_string_;                   // for BMI_TRANSPORT_METHODS_STRING
    std::string listen_string_;                    // for BMI_GET_METH_ADDR with addr 0
    support::keys::SharedKey key_;                 // the instance's key; empty: keyless
    // The allocation in force: its planes as bound on this node; allocated_ false: none.
    bool allocated_ = false;
    std::string allocation_origin_;
    std::vector<support::planes::PlaneBinding> planes_;
};

}  // namespace bmi::core
