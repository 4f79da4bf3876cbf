// SPDX-License-Identifier: LGPL-2.1-or-later
// The contract between the control layer (bmi/core) and a network method.
//
// Locking, decided once for every method:
//  - The control layer holds the method's own mutex around every call into a Method, so a
//    method never sees two of its members run at once and needs no locks for its own state.
//  - A method calls back into the control layer only through Sink, and only from inside one of
//    its members (so with its mutex held). The control layer never calls a Method while it
//    holds its own state lock; the lock order is therefore always method -> core.
//  - Peer::addr() is the one field written by the core and read by the method; it is atomic.
//
// Progress model: a method owns one file descriptor (wait_fd) that becomes readable whenever
// progress() has work to do: each method returns the epoll set of its own descriptors
// (sockets, eventfds, timers, a completion channel). The control layer puts every method's fd
// into one epoll set and sleeps there, so one kernel wait point covers all active methods. A
// method must not leave its fd readable when progress() cannot make headway (e.g. a socket it
// does not want to read yet must be removed from its interest set), or the control layer would
// spin.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bmi-types.h"
#include "methods/kit/same_node.hpp"
#include "methods/operation.hpp"
#include "methods/sink.hpp"
#include "support/keys/secret_key.hpp"
#include "support/keys/trusted_sources.hpp"
#include "support/planes/plane_binding.hpp"
#include "support/settings/settings.hpp"

namespace bmi::method {

// Result of work a lookup can do before the method's mutex is taken (name resolution), so a
// slow resolver never stalls progress of other threads. Opaque to the control layer.
struct LookupHint {
    virtual ~LookupHint() = default;
};
// The hint the control layer gives shm's lookup of a same-node server that a tcp address named
// (methods/kit/same_node.hpp): how to reach it and ask it again.
struct SameNodeLookup final : LookupHint {
    std::shared_ptr<kit::SameNodeRoute> route;
};

// The BMI API an instance was created through (doc/dialects.md). It decides which legacy
// framing a method speaks to a peer without libbmi's handshake, unless a setting overrides it.
enum class ApiDialect : std::uint8_t {
    orangefs,    // OrangeFS's bmi.h: the OrangeFS tcp framing (magic 51903, 24-byte header)
    standalone,  // the standalone BMI library's bmi.h: its tcp framing (magic 51912, 25 bytes)
};

// Every row of the settings table: support's, then each method's own (its *_settings.hpp),
// in method-table order (method_table.cpp).
const support::SettingTable& all_settings();

// What BMI_initialize gave this method. The control layer builds it in one function
// (MethodSet::method_config) for a server's listen address and a client's first lookup alike.
struct Config {
    std::string listen_address;       // "" for a client-only instance, else e.g. "tcp://host:port"
    int flags = 0;                    // BMI_INIT_SERVER | BMI_TCP_BIND_SPECIFIC | ...
    bmi_size_t unexpected_limit = 0;  // 0: the method's default
    // Every tunable, from the environment and the option string (support/settings/): a
    // method reads its own rows here and never the environment. Default-constructed, it
    // holds every row's default.
    support::Settings settings{all_settings()};
    // The instance's security key (support/keys): from its allocation or its key_file
    // setting, loaded once by the control layer; empty: keyless.
    support::keys::SharedKey key;
    // With an allocation in force (doc/planes.md): this method's planes. A server listens on
    // them (and only there); every peer it reaches must be on one of them.
    std::vector<support::planes::PlaneBinding> planes;
    bool allocated = false;  // an allocation is in force (planes may still be empty)
    ApiDialect dialect = ApiDialect::orangefs;
    // A server's same-node offers (methods/kit/same_node.hpp), shared by its tcp method, which
    // hands them out, and its shm method, whose listener takes their tickets; null: none.
    std::shared_ptr<kit::SameNodeTickets> same_node;
    // BMI_TRUSTED_CONNECTION's policy for a question asked outside the method (tcp's same-node
    // question binds its source port by it, as the method's connections do); methods get
    // the policy itself through set_info(info_trusted_sources).
    std::optional<support::keys::TrustedSources> trusted;
    // OrangeFS built with --enable-trusted-connections is this process (its accessors are
    // linked in): until a policy comes, tcp connects from port 1023 down as OrangeFS's
    // clients do, whose servers may trust only such ports.
    bool orangefs_trusted_build = false;
};

// A network method. Every member is called with the method's mutex held (see top of file).
class Method {
public:
    // Closes every connection and completes nothing: the control layer has already cancelled
    // and reaped every outstanding operation before it destroys a method.
    virtual ~Method() = default;

    virtual std::string_view name() const = 0;    // "bmi_tcp"
    virtual std::string_view scheme() const = 0;  // "tcp": the address prefix before "://"

    // Resolves an address string of this method's scheme. Must not block on the network for
    // long (name resolution of a host name may take as long as the resolver does). Returns 0
    // and sets out, which may be a peer the method already knows (then out->addr() != 0).
    // -BMI_EINVAL for a malformed string.
    virtual int lookup(std::string_view address, std::shared_ptr<Peer>& out) = 0;
    // The same with the result of Descriptor::prepare_lookup for this address; methods that
    // have no prepare_lookup keep the default.
    virtual int lookup_prepared(std::string_view address, const LookupHint& /*hint*/,
                                std::shared_ptr<Peer>& out) {
        return lookup(address, out);
    }

    // Posts op. 0: pending, the method will call Sink::complete later. 1: finished during the
    // call (actual_size set, Sink::complete is NOT called). <0: -BMI_E*, nothing posted.
    virtual int post(Operation& op) = 0;

    // Fast path for a send (kind send or send_unexpected) of one buffer or a list of at most
    // send_now_segments, that can leave during the call, tried before the control layer builds an
    // Operation: 1 if the message is sent, <0 (-BMI_E*) if it must be refused (what post() would
    // say), 0 to go the usual way through post(), send_now_started if part of it left and the
    // method holds the rest. The default always says 0. The control layer calls it while it
    // holds its own state lock (that is what keeps `peer` alive without a reference count), so
    // send_now must not call the Sink, and must not block.
    // send_now_started: the control layer posts that same send next, holding the method's
    // lock throughout, and post() adopts what was started: the operation completes once the
    // socket has taken the rest, as a queued send does, since nothing but a later call into
    // BMI would move that rest, and a caller whose send is done need not make one.
    static constexpr int send_now_started = 2;
    virtual int send_now(Peer& /*peer*/, OpKind /*kind*/, bmi_msg_tag_t /*tag*/,
                         std::span<const Segment> /*segments*/) {
        return 0;
    }

    // Moves data without blocking; completes operations through the Sink.
    virtual void progress() = 0;

    // Readable whenever progress() has work (see top of file). Stays valid until destruction.
    virtual int wait_fd() const = 0;

    // Fast path for an instance with a single active method: if wait_fd() is an epoll set, the
    // method may accept the control layer's wake-up fd and its timer fd into it (one call
    // each; their events carry data.u64 == tag, at least 2^63, and must be ignored by the
    // method, which must not read these fds). The control layer then sleeps in
    // epoll_wait on wait_fd() itself, with no lock held, and hands what it returned to
    // progress_events, which saves a nested epoll and a second epoll_wait per wake-up. The
    // events may be stale by then (another thread may have progressed): handlers must treat
    // EAGAIN as "nothing to do". Default: not supported.
    virtual bool accept_wake_fd(int /*fd*/, std::uint64_t /*tag*/) { return false; }
    virtual void progress_events(std::span<const epoll_event> /*ready*/) { progress(); }
    // With several methods active, the control layer looks at its shared set once per pass
    // and calls this instead of progress() for a method whose wait_fd() was not readable: the
    // work no descriptor announces (rings, quota BMI_unexpected_free returned), without an
    // epoll_wait on the method's own set. Default: progress(), for a method that cannot tell.
    virtual void progress_without_events() { progress(); }
    // A pass of a caller that polls in a loop (a test with no idle time, one method active):
    // no descriptor hint comes with it and the next pass follows soon, so a method may look
    // first where its last message came from, and at all of its descriptors only every few
    // passes. Default: progress().
    virtual void progress_polling() { progress(); }

    // The sleep protocol: before a test call sleeps, the control layer calls before_sleep(),
    // where a method finds the work no descriptor announces. shm polls its rings, spins for a
    // bounded time and then asks its peers to signal wait_fd() (they deliver without the
    // kernel, so they ring only when asked); tcp spins on its sockets and retries what waited
    // for unexpected quota; verbs retries what waited for that quota. It returns true if it
    // moved anything or has work it can do at once; the control layer then looks for
    // completions again instead of sleeping. After the sleeping thread wakes (and before any
    // other thread may start a new sleep) the control layer calls after_wake() on every method:
    // shm's peers stop signalling while the process is awake, tcp adjusts its spin.
    virtual bool before_sleep() { return false; }
    virtual void after_wake() {}
    // Called after before_sleep() found nothing, before every sleep. `allowed`: direct mode,
    // in an instance that only one thread has used so far; the method may then take the sleep
    // itself in a read of its own socket, where the wake-up costs one system call less than
    // epoll_wait and then the read. Nothing else can wake that read, so the method takes it
    // only where nothing else can concern it (its own conditions), and returns by `deadline`
    // (`now` is the caller's clock reading). True if the read brought something; false if the
    // method declined or the read found nothing in its time, and the control layer then
    // sleeps in epoll: whatever the method took out of its epoll set must be back by then.
    virtual bool sleep_in_read(std::chrono::steady_clock::time_point /*now*/,
                               std::chrono::steady_clock::time_point /*deadline*/,
                               bool /*allowed*/) {
        return false;
    }

    // Completes op with -BMI_ECANCEL through the Sink if it is still pending (tearing down the
    // connection if the op had partly moved data); no-op if it already completed.
    virtual void cancel(Operation& op) = 0;

    // The application dropped its last reference to peer: close connections, fail the peer's
    // pending operations with -BMI_ECANCEL.
    virtual void forget_peer(Peer& peer) = 0;
    // True if nothing can reach peer again: it reached us first, we cannot connect back to it
    // and it has no connection left (OrangeFS's BMI_DROP_ADDR_QUERY). A method that reports
    // this must also call Sink::peer_gone when it becomes true for a registered peer.
    virtual bool peer_gone(const Peer& /*peer*/) const { return false; }

    // String form another process can pass to lookup (BMI_addr_rev_lookup).
    virtual std::string describe_peer(const Peer& peer) const = 0;
    // The peer's network address as seen by us, e.g. "192.168.1.5" (rev_lookup_unexpected).
    virtual std::string peer_host(const Peer& peer) const = 0;

    // BMI_query_addr_range: 1 if peer is in the range id_string/netmask, 0 if not, <0 error.
    virtual int query_range(const Peer& peer, std::string_view id_string, int netmask) const = 0;

    // True if post() handles segment_count > 1 itself; otherwise the control layer packs.
    virtual bool native_lists() const = 0;
    // Largest unexpected message this method accepts (BMI_GET_UNEXP_SIZE).
    virtual bmi_size_t unexpected_limit() const = 0;
    // Largest message this method moves (BMI_CHECK_MAXSIZE).
    virtual bmi_size_t max_message_size() const = 0;

    // The address this instance listens on ("" if it does not), e.g. for BMI_GET_METH_ADDR.
    virtual std::string listen_address() const = 0;

    // BMI_memalloc / BMI_memfree for a peer of this method. A method whose transfers are
    // cheaper from memory it prepared (verbs: already registered; shm: mapped by the peer
    // too) returns such memory; nullptr lets the control layer allocate. mem_free returns
    // false for memory the method did not allocate (the control layer then frees it).
    virtual void* mem_alloc(bmi_size_t /*size*/) { return nullptr; }
    virtual bool mem_free(void* /*buffer*/) { return false; }

    // Method-specific options (BMI_TCP_*); peer may be nullptr for method-wide options.
    // -BMI_ENOSYS for options the method does not know.
    virtual int set_info(Peer* peer, int option, void* arg) = 0;
    virtual int get_info(Peer* peer, int option, void* arg) = 0;
};

// A get_info option of libbmi's own, never seen by applications: the port a listening method
// is bound to, as an int (the standalone dialect's BMI_TCP_GET_PORT maps to it). A method
// without a port, or a client, answers -BMI_ENOSYS.
inline constexpr int info_listen_port = 0x1F01;

// A set_info option of libbmi's own: the sources allowed to connect, a
// support::keys::TrustedSources (BMI_TRUSTED_CONNECTION). A method that accepts connections
// refuses the others at accept; one that does not (or cannot tell) answers -BMI_ENOSYS.
inline constexpr int info_trusted_sources = 0x1F02;
// A set_info option of libbmi's own, for a running shm method: serve the same-node listener
// reserved in a kit::SameNodeTickets (the argument). -BMI_EADDRINUSE if it listens already.
inline constexpr int info_serve_same_node = 0x1F03;
// A set_info option of libbmi's own, for shm: the kit::SameNodeRoute (the argument) it filed
// with SameNodeRenewals has been asked again; the connections that wait for it connect now.
inline constexpr int info_same_node_renewed = 0x1F04;

// How the static method table describes a compiled-in method.
struct Descriptor {
    std::string_view name;    // "bmi_tcp"
    std::string_view scheme;  // "tcp"
    // Creates an instance; returns 0 and sets out, or -BMI_E* (e.g. listen address in use).
    int (*create)(const Config& config, Sink& sink, std::unique_ptr<Method>& out);
    // Optional (may be nullptr): called WITHOUT any lock before lookup; may block (e.g. in
    // getaddrinfo). 0 and out set, or -BMI_E* (then lookup is not called).
    int (*prepare_lookup)(std::string_view address, std::unique_ptr<LookupHint>& out) = nullptr;
    // Another name and scheme for the same method, e.g. OrangeFS's "bmi_ib" and "ib://" for
    // verbs: accepted in method lists and addresses, handed to the method as name and scheme.
    std::string_view alias_name = {};
    std::string_view alias_scheme = {};
    // Optional: asks the server at `address`, on this node, for a same-node offer
    // (methods/kit/same_node.hpp); called WITHOUT any lock, blocks up to the method's setup
    // deadline. 0 and out set, or -BMI_E* (no offer: the lookup stays on this method).
    int (*ask_same_node)(std::string_view address, const Config& config,
                         kit::SameNodeOffer& out) = nullptr;
    // Optional: binds and listens on the same-node listener `name` without starting the
    // method, which adopts the socket later (Config::same_node). 0 and fd, or -BMI_E*.
    int (*reserve_same_node)(std::string_view name, int& fd) = nullptr;
};

}  // namespace bmi::method
