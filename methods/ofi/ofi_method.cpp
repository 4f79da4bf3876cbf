// SPDX-License-Identifier: LGPL-2.1-or-later
// The ofi method's life and its address book: creation, lookup, the peers' names.
#include "methods/ofi/ofi_method.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "methods/kit/posted_recvs.hpp"
#include "methods/ofi/ofi_auth_key.hpp"
#include "methods/ofi/ofi_method_impl.hpp"
#include "methods/ofi/ofi_settings.hpp"
#include "methods/ofi/ofi_shm.hpp"
#include "support/keys/secret_key.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"
#include "support/optional_library/libfabric.hpp"
#include "support/planes/cidr.hpp"

namespace bmi::method::ofi {

namespace {
// The unexpected limit the others use too (16 KiB), within a receive buffer.
constexpr bmi_size_t default_unexpected_limit = 16 * 1024;
// What the provider is asked to copy at once (no completion): rxm over tcp copies up to about
// its 16 KiB buffer and refuses a larger request, which would leave its 64-byte default.
constexpr std::size_t largest_inject_request = 8 * 1024;
constexpr int goodbye_reads = 16;
// Forgotten peers' entries kept (OfiMethod::forgotten_.lingering): a peer retrying at once after a
// refusal or a reset finds its entry, which the next 64 forgotten peers push out.
constexpr std::size_t most_lingering = 64;

// What a lookup resolved before the method's lock was taken: the peer's address as the
// provider writes it, for its address vector.
struct ProviderName final : LookupHint {
    std::vector<std::byte> bytes;
};

// The provider address of `address`: host:port resolved to a sockaddr_in (name resolution may
// block: called with no lock held), shm's endpoint name with its terminating zero, or the raw
// form's bytes. A domain names no peer.
int provider_name(const OfiAddress& address, std::vector<std::byte>& out) {
    switch (address.form) {
        case AddressForm::shm_name: {
            const std::string name = shm_endpoint_name(address.node);
            const auto* bytes = reinterpret_cast<const std::byte*>(name.c_str());
            out.assign(bytes, bytes + name.size() + 1);
            return 0;
        }
        case AddressForm::raw:
            out = address.raw;
            return 0;
        case AddressForm::domain:
            return -BMI_EINVAL;
        case AddressForm::host_port:
            break;
    }
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* found = nullptr;
    if (getaddrinfo(address.node.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
        return -BMI_EHOSTUNREACH;
    sockaddr_in in{};
    std::memcpy(&in, found->ai_addr, sizeof in);
    freeaddrinfo(found);
    in.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.service)));
    out.resize(sizeof in);
    std::memcpy(out.data(), &in, sizeof in);
    return 0;
}

// Whether `address` is an IPv4 loopback endpoint: a numeric host:port, or a socket provider's
// raw sockaddr_in.
bool names_loopback(const OfiAddress& address) {
    in_addr target{};
    if (address.has_port()) {
        if (inet_pton(AF_INET, address.node.c_str(), &target) != 1) return false;
    } else if (address.form == AddressForm::raw && socket_addressed(address.provider) &&
               address.raw.size() >= sizeof(sockaddr_in)) {
        sockaddr_in in{};
        std::memcpy(&in, address.raw.data(), sizeof in);
        if (in.sin_family != AF_INET) return false;
        target = in.sin_addr;
    } else {
        return false;
    }
    return (ntohl(target.s_addr) >> 24) == 127;
}
}  // namespace

int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out) {
    std::string why;
    if (support::load_libfabric(&why) == nullptr) {
        BMI_WARN("bmi_ofi: %s", why.c_str());
        return -BMI_ENOSYS;  // as for the other optional libraries (doc/architecture.md)
    }
    auto method = std::make_unique<OfiMethod>(config, sink);
    if (int rc = method->start(config); rc != 0) return rc;
    out = std::move(method);
    return 0;
}

int OfiMethod::start(const Config& config) {
    if (epoll_fd_ < 0) return -BMI_ENOMEM;
    load_limits(config);
    if (int rc = timers_.open(); rc != 0) return rc;
    epoll_event timer{};
    timer.events = EPOLLIN;
    timer.data.u64 = timers_tag;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timers_.fd(), &timer) != 0) return -BMI_ENOMEM;
    support::keys::SharedKey key;
    if (int rc = support::keys::method_key(config.key, config.settings, key); rc < 0) return rc;
    gate_.use(std::move(key));
    if (int rc = gate_.load_encryption(config.settings); rc < 0) return rc;
    if (std::string why;
        parse_auth_key(config.settings.text(SettingId::auth_key), open_rules_.auth_key, why) != 0) {
        BMI_WARN("bmi_ofi: ofi_auth_key (BMI_OFI_AUTH_KEY) '%s': %s",
                 config.settings.text(SettingId::auth_key).c_str(), why.c_str());
        return -BMI_EINVAL;
    }
    if (config.listen_address.empty()) return 0;  // a client opens its fabric at its first lookup
    auto address = parse_address(config.listen_address);
    // The standalone dialect gives a listen address without a port a free one, as on tcp
    // (Mercury's na_bmi listens on "ofi://HOST" so).
    if (auto parts = support::split_scheme(config.listen_address);
        !address && config.dialect == ApiDialect::standalone && parts &&
        !support::names_port(parts->rest))
        address = parse_address(config.listen_address + ":0");
    if (!address) return -BMI_EINVAL;
    if (address->form == AddressForm::raw) {
        // Which bytes a provider takes as its source differs by provider; a raw address is
        // what a server reports, not what it is told.
        BMI_WARN("bmi_ofi: %s: listen on a host:port, a shm name or a domain, not a raw address",
                 config.listen_address.c_str());
        return -BMI_EINVAL;
    }
    return open(*address, true);
}

namespace {
Sizes sizes_of(const Config& config) {
    Sizes sizes;
    sizes.unexpected_limit = config.unexpected_limit > 0 ? config.unexpected_limit
                                                         : default_unexpected_limit;
    sizes.eager_bytes = static_cast<std::size_t>(config.settings.number(SettingId::eager_bytes));
    sizes.chunk_bytes = static_cast<std::size_t>(config.settings.number(SettingId::chunk_bytes));
    sizes.buffer_count = static_cast<std::size_t>(config.settings.number(SettingId::recv_buffers));
    sizes.buffer_bytes =
        std::max(sizes.eager_bytes, static_cast<std::size_t>(sizes.unexpected_limit)) +
        support::keys::NumberedRecords::trailer_size;
    return sizes;
}

Switches switches_of(const Config& config) {
    return Switches{.sweep_dead_clients = config.settings.flag(SettingId::shm_sweep),
                    .grants = config.settings.flag(SettingId::grants),
                    .wait_descriptor = config.settings.flag(SettingId::wait_descriptor)};
}
}  // namespace

OfiMethod::OfiMethod(const Config& config, Sink& sink)
    : sink_(sink),
      router_(sink),
      open_rules_{config.planes, {}},
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      sizes_(sizes_of(config)),
      switches_(switches_of(config)),
      waiting_(static_cast<int>(config.settings.number(SettingId::spin_us)),
               static_cast<int>(config.settings.number(SettingId::transfer_spin_us)),
               static_cast<int>(config.settings.number(SettingId::nap_us))) {}

int OfiMethod::allocated_choice(const OfiAddress& address, FabricChoice& out) const {
    if (open_rules_.planes.empty()) return 0;
    for (const auto& plane : open_rules_.planes) {
        if (plane.ofi_provider != address.provider) continue;
        out.domain = plane.ofi_domain;
        if (plane.dscp && socket_addressed(address.provider))
            out.tclass = fi_tc_dscp_set(static_cast<std::uint8_t>(*plane.dscp));
        return 0;
    }
    std::string allocated;
    for (const auto& plane : open_rules_.planes)
        allocated += (allocated.empty() ? "" : ", ") + plane.plane;
    BMI_WARN("bmi_ofi: %s is on none of this instance's allocated planes (ofi %s)",
             format_address(address.provider, address.rest).c_str(), allocated.c_str());
    return -BMI_EADDRNOTAVAIL;
}

int OfiMethod::open(const OfiAddress& address, bool listen) {
    std::string why;
    // Every buffer and every in-flight send can complete at once.
    const std::size_t cq_size = std::max<std::size_t>(1024, sizes_.buffer_count * 4);
    // A client's endpoint listens too (rxm connects both ways): one that first reaches a
    // loopback address stays on loopback rather than open a port on every interface.
    // Only a numeric host is looked at: no resolver runs under the method's lock.
    OfiAddress bind_to = address;
    const bool loopback = !listen && names_loopback(address);
    if (loopback) {
        // Whole new strings: gcc 12 -O3 misreads assigning a literal here (-Wrestrict).
        bind_to.form = AddressForm::host_port;
        bind_to.node = std::string("127.0.0.1");
        bind_to.service = std::string("0");
    }
    // An shm client names itself: libfabric's default name holds a colon-separated user id
    // and index that would not read back as an address.
    const bool shm_client = !listen && address.is_shm();
    if (address.is_shm()) {
        note_cma_permission();
        if (switches_.sweep_dead_clients) remove_regions_of_dead_clients();
        const int rc = shm_client ? shm_claim_.claim_client_name(bind_to.node)
                                  : shm_claim_.claim(address.node);
        if (rc != 0) return rc;
    }
    FabricChoice choice;
    if (int rc = allocated_choice(address, choice); rc != 0) return rc;
    if (!open_rules_.auth_key.empty() && !takes_auth_key(address.provider)) {
        BMI_WARN("bmi_ofi: ofi+%s takes no authorization key; ofi_auth_key (BMI_OFI_AUTH_KEY) is "
                 "for cxi",
                 address.provider.c_str());
        return -BMI_EINVAL;
    }
    choice.auth_key = open_rules_.auth_key;
    choice.wait_descriptor = switches_.wait_descriptor;
    if (address.form == AddressForm::domain && !address.node.empty()) {
        if (!choice.domain.empty() && choice.domain != address.node) {
            BMI_WARN("bmi_ofi: %s: domain %s is not the allocated plane's (%s)",
                     address.rest.c_str(), address.node.c_str(), choice.domain.c_str());
            return -BMI_EADDRNOTAVAIL;
        }
        choice.domain = address.node;
    }
    if (int rc = fabric_.open(bind_to, listen || loopback || shm_client, cq_size,
                              std::min(sizes_.eager_bytes, largest_inject_request), choice, why);
        rc != 0) {
        BMI_WARN("bmi_ofi: %s: %s", address.provider_hint().c_str(), why.c_str());
        return rc;
    }
    provider_ = {address.provider, address.provider == "shm"};
    // Measured by the whole conformance suite: messages pass over these, the peer rules do not.
    if (provider_.name == "sockets" || provider_.name == "udp")
        BMI_WARN("bmi_ofi: %s reports no departures and keeps no peekable unexpected queue: "
                 "the peer deadlines and bounds do not hold over it (doc/methods/ofi.md)",
                 address.provider_hint().c_str());
    own_endpoint_ = address_of_name(fabric_.name());
    if (address.is_shm()) {
        note_shm_endpoint(own_endpoint_, true);
        region_locks_.own = ShmRegionLock::open_own(own_endpoint_);
    }
    sizes_.inject_bytes = fabric_.inject_limit();
    sizes_.iov_limit = 1;
    if (fabric_.needs_local_mr())
        registrations_.use(fabric_.domain());
    else
        sizes_.iov_limit = std::max<std::size_t>(
            1, std::min(fabric_.info().tx_attr->iov_limit, fabric_.info().rx_attr->iov_limit));
    if (fabric_.wait_fd() >= 0) {
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.u64 = provider_tag;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fabric_.wait_fd(), &event) != 0) return -BMI_ENOMEM;
    } else if (int rc = waiting_.start_naps(epoll_fd_, naps_tag); rc != 0) {
        return rc;
    }
    if (listen) {
        std::string rest = address.rest;
        if (address.has_port() && fabric_.name().size() >= sizeof(sockaddr_in)) {
            // Port 0 asked the provider to pick one: report the one it bound.
            sockaddr_in bound{};
            std::memcpy(&bound, fabric_.name().data(), sizeof bound);
            rest = support::format_host_port(address.node, ntohs(bound.sin_port));
            listen_address_ = format_address(provider_.name, rest);
        } else if (address.is_shm()) {
            listen_address_ = format_address(provider_.name, rest);
            if (switches_.sweep_dead_clients)
                timers_.schedule(sweep_key, kit::Deadlines::Clock::now() + limits_.shm_sweep);
        } else {
            listen_address_ = own_endpoint_;  // where the provider put it
        }
    }
    for (std::size_t i = 0; i < sizes_.buffer_count; ++i) {
        Request& buffer = new_request(Request::Role::buffer, nullptr);
        buffer.bytes.resize(sizes_.buffer_bytes);
        repost_buffer(buffer);
    }
    return 0;
}

std::uint8_t OfiMethod::bye_number(const OfiPeer& peer) const {
    // Right after the last message that left: those still in the backlog never will.
    if (auto it = backlog_.by_peer.find(peer.fi_addr); it != backlog_.by_peer.end())
        for (const Request* request : it->second)
            if (numbered(kind_of(request->tag).value_or(Kind::hello)))
                return number_of(request->tag);
    return peer.order.next_out();
}

OfiMethod::~OfiMethod() {
    // Peers learn we left from a bye; a few reads of the queue let manual progress send it.
    if (!provider_.name.empty()) {
        if (provider_.shm) note_shm_endpoint(own_endpoint_, false);
        // Disconnections rxm has not yet seen are taken in first: over verbs a send to a peer
        // whose endpoint closed since our last progress crashes inside the provider.
        fi_cq_tagged_entry entry{};
        const bool reads = own_region_free();
        for (int i = 0; reads && i < goodbye_reads; ++i) (void)fi_cq_read(fabric_.cq(), &entry, 1);
        for (auto& [addr, peer] : peers_)
            if (peer->state == OfiPeer::State::ready && !closed_in_process(*peer))
                (void)inject_sealed(*peer, nullptr, 0,
                                    with_number(control_tag(Kind::bye, 0), bye_number(*peer)));
        for (int i = 0; reads && i < goodbye_reads; ++i) (void)fi_cq_read(fabric_.cq(), &entry, 1);
        // Registrations go after the endpoint that may use them and before the domain.
        fabric_.close_endpoint();
        for (auto& [request, owned] : requests_) Registrations::release(request->own_mr);
        registrations_.clear();
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
}

bool OfiMethod::closed_in_process(OfiPeer& peer) const {
    if (!provider_.shm) return false;
    if (!peer.in_process) peer.in_process = shm_endpoint(peer.endpoint) != ShmEndpoint::elsewhere;
    return *peer.in_process && shm_endpoint(peer.endpoint) == ShmEndpoint::closed_here;
}

bool OfiMethod::closed_in_process(fi_addr_t addr) const {
    if (!provider_.shm) return false;
    auto peer = peer_at(addr);
    return peer != nullptr && closed_in_process(*peer);
}

std::shared_ptr<OfiPeer> OfiMethod::peer_at(fi_addr_t addr) const {
    auto it = peers_.find(addr);
    return it == peers_.end() ? nullptr : it->second;
}

int prepare_lookup(std::string_view text, std::unique_ptr<LookupHint>& out) {
    auto address = parse_address(text);
    if (!address) return -BMI_EINVAL;
    auto hint = std::make_unique<ProviderName>();
    if (int rc = provider_name(*address, hint->bytes); rc != 0) return rc;
    out = std::move(hint);
    return 0;
}

int OfiMethod::lookup(std::string_view text, std::shared_ptr<Peer>& out) {
    std::unique_ptr<LookupHint> hint;
    if (int rc = prepare_lookup(text, hint); rc != 0) return rc;
    return lookup_prepared(text, *hint, out);
}

int OfiMethod::lookup_prepared(std::string_view text, const LookupHint& hint,
                               std::shared_ptr<Peer>& out) {
    auto address = parse_address(text);
    if (!address) return -BMI_EINVAL;
    const std::vector<std::byte>& name = static_cast<const ProviderName&>(hint).bytes;
    if (provider_.name.empty()) {
        if (int rc = open(*address, false); rc != 0) return rc;
    } else if (address->provider != provider_.name) {
        return -BMI_EPROTONOSUPPORT;  // one provider per instance
    }
    std::string endpoint = address_of_name(name);
    // shm maps a peer's region when its entry is made: the file noted before is the one our
    // sends reach, so a server restarted before our first hello is found there (greet).
    std::optional<ShmRegionFile> region;
    if (provider_.shm && !addresses_.holds(endpoint)) region = shm_region_file(endpoint);
    const fi_addr_t addr = enter_address(name, endpoint);
    if (addr == FI_ADDR_NOTAVAIL) return -BMI_EINVAL;
    const auto known = peer_at(addr);
    if (known && !peer_gone(*known)) {
        out = known;
        return 0;
    }
    auto peer = std::make_shared<OfiPeer>();
    peer->fi_addr = addr;
    peer->region = known ? known->region : region;
    peer->address = std::string(text);
    peer->endpoint = std::move(endpoint);
    // By the endpoint, as for a peer that reaches us: a raw lookup of a socket provider
    // counts by its host.
    peer->host = host_of_endpoint(peer->endpoint);
    timers_.cancel_all(addr);  // a gone peer's, if it was there
    peers_.insert_or_assign(addr, peer);
    out = std::move(peer);
    return 0;
}

std::string OfiMethod::address_of_name(const std::vector<std::byte>& name) const {
    if (provider_.shm) {
        std::string_view text(reinterpret_cast<const char*>(name.data()),
                              strnlen(reinterpret_cast<const char*>(name.data()), name.size()));
        if (text.starts_with(shm_name_prefix)) text.remove_prefix(shm_name_prefix.size());
        return format_address(provider_.name, text);
    }
    if (fabric_.info().addr_format == FI_SOCKADDR_IN && name.size() >= sizeof(sockaddr_in)) {
        sockaddr_in in{};
        std::memcpy(&in, name.data(), sizeof in);
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
        return format_address(provider_.name, support::format_host_port(text, ntohs(in.sin_port)));
    }
    return format_address(provider_.name, format_raw(name));
}

void OfiMethod::finish(Operation& op, int error) {
    auto& slots = method_slots<OpSlots>(op);
    unstage(op);
    slots.phase = OpSlots::none;
    if (slots.counted) {
        slots.counted = false;
        --in_flight_.ops_waiting;
    }
    router_.complete(op, error);
}

void OfiMethod::forget_peer(Peer& base) {
    auto& peer = static_cast<OfiPeer&>(base);
    kit::fail_posted_recvs(peer, -BMI_ECANCEL,
                           [this](Operation& op, int e) { end_posted_recv(op, e); });
    flush_waiting(peer, -BMI_ECANCEL);
    if (!peer_gone(peer) || peer_at(peer.fi_addr).get() != &peer) return;
    erase_peer(peer.fi_addr);
}

fi_addr_t OfiMethod::enter_address(const std::vector<std::byte>& name,
                                   const std::string& endpoint) {
    // Room first: the kept entries of endpoints that have gone since.
    if (!forgotten_.silenced.empty()) release_silenced();
    const fi_addr_t addr = addresses_.insert(fabric_.av(), endpoint, name);
    // Named again before its requests ended, or while kept: it stays, for the peer made at it.
    std::erase(forgotten_.retiring, addr);
    std::erase(forgotten_.silenced, addr);
    std::erase(forgotten_.lingering, addr);
    return addr;
}

bool OfiMethod::enter_new_region(OfiPeer& peer) {
    if (peer.fi_addr == FI_ADDR_NOTAVAIL) return false;  // an earlier attempt found no room
    const auto file = shm_region_file(peer.endpoint);
    if (!peer.region || !file || *file == *peer.region) {
        if (!peer.region) peer.region = file;
        return true;
    }
    const fi_addr_t old = peer.fi_addr;
    auto self = peer_at(old);
    if (!self || named_by_requests(old)) return true;
    auto address = parse_address(peer.endpoint);
    std::vector<std::byte> name;
    if (!address || provider_name(*address, name) != 0) return true;
    // Nothing else names the old entry once the peer has been failed (fail_peer): its clocks
    // start again under the new one when it is ready.
    timers_.cancel_all(old);
    handshakes_.erase(old);
    for (kit::ProgressDeadline* clock :
         {&peer.send_clock, &peer.stall_clock, &peer.silence_clock, &peer.probe_clock})
        clock->timed = false;
    peers_.erase(old);
    std::erase(forgotten_.retiring, old);
    std::erase(forgotten_.silenced, old);
    std::erase(forgotten_.lingering, old);
    // shm finds a name it holds by its text: the old entry goes first, and its mapping with it.
    addresses_.remove(fabric_.av(), old);
    peer.fi_addr = enter_address(name, peer.endpoint);
    if (peer.fi_addr == FI_ADDR_NOTAVAIL) return false;
    peer.region = file;
    peer.in_process.reset();  // the new process may be this one
    peer.region_lock.reset();
    peer.region_lock_opened = false;
    peers_.insert_or_assign(peer.fi_addr, self);
    BMI_LOG(ofi, "bmi_ofi: %s has a new region: a new entry reaches it", peer.address.c_str());
    return true;
}

void OfiMethod::erase_peer(fi_addr_t addr) {
    const auto peer = peer_at(addr);
    const bool closed_here = peer && closed_in_process(*peer);
    handshakes_.erase(addr);
    release_ticket(addr);
    timers_.cancel_all(addr);
    drop_parked(addr);
    if (peer) drop_waiting(*peer);
    peers_.erase(addr);
    if (closed_here && !Fabric::removes_closed_local_peers()) {
        // Removing it would crash; the provider keeps it until the address vector closes.
        addresses_.abandon(addr);
        return;
    }
    forgotten_.retiring.push_back(addr);
    retire_if_unused(addr);
}

bool OfiMethod::named_by_requests(fi_addr_t addr) const {
    // Receive buffers take any sender: they name no entry, whatever they last held. The
    // backlog's requests are among requests_ too.
    for (const auto& [request, owned] : requests_)
        if (request->role != Request::Role::buffer && request->addr == addr) return true;
    return false;
}

void OfiMethod::retire_if_unused(fi_addr_t addr) {
    if (std::find(forgotten_.retiring.begin(), forgotten_.retiring.end(), addr) ==
        forgotten_.retiring.end())
        return;
    if (named_by_requests(addr)) return;
    std::erase(forgotten_.retiring, addr);
    if (provider_.shm && shm_endpoint_may_send(addresses_.endpoint_of(addr))) {
        forgotten_.silenced.push_back(addr);
        return;
    }
    // shm's removal closes nothing, and its vector holds only 256.
    if (provider_.shm) {
        addresses_.remove(fabric_.av(), addr);
        return;
    }
    forgotten_.lingering.push_back(addr);
    if (forgotten_.lingering.size() <= most_lingering) return;
    addresses_.remove(fabric_.av(), forgotten_.lingering.front());
    forgotten_.lingering.pop_front();
}

void OfiMethod::release_silenced() {
    std::erase_if(forgotten_.silenced, [this](fi_addr_t addr) {
        const std::string endpoint = addresses_.endpoint_of(addr);
        if (shm_endpoint_may_send(endpoint)) return false;
        // A peer endpoint of this process that closed: as erase_peer says.
        if (shm_endpoint(endpoint) == ShmEndpoint::closed_here &&
            !Fabric::removes_closed_local_peers())
            addresses_.abandon(addr);
        else
            addresses_.remove(fabric_.av(), addr);
        return true;
    });
}

bool OfiMethod::peer_gone(const Peer& base) const {
    const auto& peer = static_cast<const OfiPeer&>(base);
    return peer.lost || (peer.reached_us && peer.state == OfiPeer::State::departed);
}

void OfiMethod::depart(OfiPeer& peer) {
    fail_peer(peer, -BMI_ECONNRESET);
    if (peer_gone(peer) && peer.addr() != 0) sink_.peer_gone(peer);
}

std::string OfiMethod::describe_peer(const Peer& peer) const {
    return static_cast<const OfiPeer&>(peer).address;
}

std::string OfiMethod::peer_host(const Peer& peer) const {
    return static_cast<const OfiPeer&>(peer).host;
}

int OfiMethod::query_range(const Peer& base, std::string_view id_string, int netmask) const {
    const auto& peer = static_cast<const OfiPeer&>(base);
    auto parts = support::split_scheme(id_string);
    if (!parts || parts->scheme != "ofi") return -BMI_EINVAL;
    std::string want(parts->rest);
    if (auto colon = want.rfind(':'); colon != std::string::npos) want.resize(colon);
    if (want == "*") return 1;
    sockaddr_in mine{}, theirs{};
    if (inet_pton(AF_INET, want.c_str(), &theirs.sin_addr) != 1 ||
        inet_pton(AF_INET, peer.host.c_str(), &mine.sin_addr) != 1)
        return want == peer.host ? 1 : 0;
    if (netmask < 0 || netmask > 32) return -BMI_EINVAL;
    mine.sin_family = theirs.sin_family = AF_INET;
    auto subnet = support::planes::host_cidr(reinterpret_cast<const sockaddr*>(&theirs));
    subnet.prefix = static_cast<unsigned>(netmask);
    support::planes::clear_host_bits(subnet);
    return subnet.contains(support::planes::host_cidr(reinterpret_cast<const sockaddr*>(&mine)))
               ? 1
               : 0;
}

bmi_size_t OfiMethod::max_message_size() const {
    // Chunks carry a large message; its size travels in 64 bits.
    return bmi_size_t{1} << 40;
}

void* OfiMethod::mem_alloc(bmi_size_t size) {
    return size > 0 ? registrations_.allocate(static_cast<std::size_t>(size)) : nullptr;
}

bool OfiMethod::mem_free(void* buffer) { return registrations_.free(buffer); }

int OfiMethod::set_info(Peer*, int, void*) { return -BMI_ENOSYS; }

int OfiMethod::get_info(Peer* peer, int option, void* arg) {
    if (option == BMI_GET_UNEXP_SIZE && peer != nullptr && arg != nullptr) {
        *static_cast<bmi_size_t*>(arg) =
            static_cast<bmi_size_t>(unexpected_limit_to(*static_cast<OfiPeer*>(peer)));
        return 0;
    }
    if (option == get_stats_option && arg != nullptr) {
        auto& stats = *static_cast<Stats*>(arg);
        stats = counted_;
        stats.early_bytes = static_cast<std::uint64_t>(held_.early.total() - held_.spares.bytes);
        stats.spare_buffers = static_cast<std::uint64_t>(held_.spares.count);
        stats.grants_held = 0;
        for (const auto& [addr, peer] : peers_) stats.grants_held += peer->grants.size();
        stats.unproven = unproven_.tickets;
        stats.handshakes = handshakes_.size();
        stats.peers = peers_.size();
        stats.unasked_dropped = sweep_.dropped();
        stats.encrypted_peers = static_cast<std::uint64_t>(
            std::count_if(peers_.begin(), peers_.end(),
                          [](const auto& entry) { return entry.second->records != nullptr; }));
        stats.silenced = forgotten_.silenced.size();
        stats.naps = waiting_.naps_taken();
        return 0;
    }
    if (option != info_listen_port || listen_address_.empty() || arg == nullptr) return -BMI_ENOSYS;
    auto address = parse_address(listen_address_);
    if (!address || !address->has_port()) return -BMI_ENOSYS;
    *static_cast<int*>(arg) = std::stoi(address->service);
    return 0;
}

}  // namespace bmi::method::ofi
