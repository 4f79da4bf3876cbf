// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_fabric.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "bmi-types.h"
#include "support/keys/key_proof.hpp"
#include "support/logging/log.hpp"
#include "support/optional_library/libfabric.hpp"

namespace bmi::method::ofi {

namespace {
// 1.17 is Debian 12's; 2.x still answers a 1.x request with the 1.x interfaces it kept.
constexpr std::uint32_t api_version = FI_VERSION(1, 17);
// Below this an injected message saves too little to ask the provider again.
constexpr std::size_t smallest_inject = 256;

char* copy_text(const std::string& text) { return strdup(text.c_str()); }

template <class Fid>
void close_fid(Fid*& object) {
    if (object != nullptr) fi_close(&object->fid);
    object = nullptr;
}

// rxm told to give its core provider's queues a poll set (FI_OFI_RXM_DEF_WAIT_OBJ, or
// FI_OFI_RXM_DEF_TCP_WAIT_OBJ over tcp, set to pollfd) still hands out a descriptor for our
// queue, but in libfabric 1.17 nothing signals it when a message arrives: a sleep there would
// last the caller's whole idle time. Such a queue is polled and napped on, as shm's is.
bool descriptor_unsignalled(const char* provider) {
    const std::string_view name = provider != nullptr ? provider : "";
    if (name.find("ofi_rxm") == std::string_view::npos) return false;
    const char* wait_object = nullptr;
    if (name.find("tcp") != std::string_view::npos)
        wait_object = std::getenv("FI_OFI_RXM_DEF_TCP_WAIT_OBJ");
    if (wait_object == nullptr || *wait_object == '\0')
        wait_object = std::getenv("FI_OFI_RXM_DEF_WAIT_OBJ");
    return wait_object != nullptr && std::strcmp(wait_object, "pollfd") == 0;
}

}  // namespace

std::string Fabric::error_text(int code) { return support::fi().strerror(code < 0 ? -code : code); }

int bmi_error(int fi_code) {
    switch (fi_code < 0 ? -fi_code : fi_code) {
        case FI_ECANCELED:
            return -BMI_ECANCEL;
        case FI_ETRUNC:
        case FI_EMSGSIZE:
            return -BMI_EMSGSIZE;
        case FI_ENOMEM:
            return -BMI_ENOMEM;
        case FI_ETIMEDOUT:
            return -BMI_ETIMEDOUT;
        case FI_ECONNREFUSED:
            return -BMI_ECONNREFUSED;
        case FI_EHOSTUNREACH:
            return -BMI_EHOSTUNREACH;
        default:
            return -BMI_ECONNRESET;
    }
}

bool Fabric::removes_closed_local_peers() { return support::fi().version() <= FI_VERSION(1, 17); }

int Fabric::open(const OfiAddress& address, bool bind, std::size_t cq_size,
                 std::size_t inject_bytes, const FabricChoice& choice, std::string& why) {
    const support::Libfabric& lib = support::fi();
    fi_info* hints = lib.dupinfo(nullptr);
    if (hints == nullptr) return -BMI_ENOMEM;
    hints->fabric_attr->prov_name = copy_text(address.provider_hint());
    hints->ep_attr->type = FI_EP_RDM;
    // FI_SOURCE: every arrival names its sender, so a peer cannot speak for another.
    hints->caps = FI_TAGGED | FI_MSG | FI_SOURCE | FI_DIRECTED_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    // FI_MR_LOCAL: we can register what we post, for the providers that need it (verbs).
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    if (!choice.domain.empty()) hints->domain_attr->name = copy_text(choice.domain);
    if (choice.tclass != 0) hints->tx_attr->tclass = choice.tclass;
    hints->domain_attr->av_type = FI_AV_TABLE;
    tags_in_data_ = address.is_shm();
    if (tags_in_data_) hints->domain_attr->cq_data_size = sizeof(std::uint64_t);
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    // shm is addressed by name (an endpoint's name is its region in /dev/shm), the socket
    // providers by host and port, the others in a format of their own.
    hints->addr_format = address.is_shm()                     ? FI_ADDR_STR
                         : socket_addressed(address.provider) ? FI_SOCKADDR_IN
                                                              : FI_FORMAT_UNSPEC;
    const std::string shm_name = address.is_shm() ? shm_endpoint_name(address.node) : "";
    const char* node = !bind                ? nullptr
                       : address.has_port() ? address.node.c_str()
                       : address.is_shm()   ? shm_name.c_str()
                                            : nullptr;
    const char* service = bind && address.has_port() ? address.service.c_str() : nullptr;
    const std::uint64_t flags = bind ? FI_SOURCE : 0;
    // A small message the provider copies at once needs no completion (rxm's default is 64
    // bytes); a provider that cannot copy that much is asked for half as much, down to
    // smallest_inject, then for its own size (rxm copies at most about its buffer, which a
    // site may set smaller: FI_OFI_RXM_BUFFER_SIZE).
    auto ask = [&] {
        std::size_t asked = inject_bytes;
        for (;;) {
            hints->tx_attr->inject_size = asked;
            const int found = lib.getinfo(api_version, node, service, flags, hints, &info_);
            if (found != -FI_ENODATA || asked == 0) return found;
            asked = asked / 2 >= smallest_inject ? asked / 2 : 0;
        }
    };
    int rc = ask();
    if (rc == -FI_ENODATA && choice.tclass != 0) {
        // The class is the allocation's wish, not a condition of reaching the plane.
        BMI_WARN("bmi_ofi: %s takes no traffic class 0x%x; the plane's qos is not enforced",
                 address.provider_hint().c_str(), choice.tclass);
        hints->tx_attr->tclass = 0;
        rc = ask();
    }
    lib.freeinfo(hints);
    if (rc != 0) {
        why = "fi_getinfo(" + address.provider_hint() + "): " + error_text(rc);
        return -BMI_ENOPROTOOPT;
    }
    if (!choice.domain.empty())
        if (int chosen = keep_domain(choice.domain, why); chosen != 0) return chosen;
    if (!choice.auth_key.empty()) {
        // cxi of libfabric 1.x takes a key only in the info a domain is opened from, not in the
        // hints; fi_freeinfo frees it with that info.
        std::free(info_->domain_attr->auth_key);
        info_->domain_attr->auth_key =
            static_cast<std::uint8_t*>(std::malloc(choice.auth_key.size()));
        if (info_->domain_attr->auth_key == nullptr) return -BMI_ENOMEM;
        std::memcpy(info_->domain_attr->auth_key, choice.auth_key.data(), choice.auth_key.size());
        info_->domain_attr->auth_key_size = choice.auth_key.size();
    }
    auto fail = [&](const char* step, int code) {
        why = std::string(step) + ": " + error_text(code);
        // shm's name of a live endpoint is -FI_EBUSY.
        return code == -FI_EADDRINUSE || code == -FI_EBUSY ? -BMI_EADDRINUSE : -BMI_ENODEV;
    };
    if ((rc = lib.fabric(info_->fabric_attr, &fabric_, nullptr)) != 0) return fail("fi_fabric", rc);
    const char* provider = info_->fabric_attr->prov_name;
    keeps_unasked_ = provider != nullptr && std::strstr(provider, "ofi_rxm") != nullptr;
    if ((rc = fi_domain(fabric_, info_, &domain_, nullptr)) != 0) return fail("fi_domain", rc);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    if ((rc = fi_av_open(domain_, &av_attr, &av_, nullptr)) != 0) return fail("fi_av_open", rc);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.size = cq_size;
    cq_attr.wait_obj = FI_WAIT_FD;
    if (!choice.wait_descriptor || descriptor_unsignalled(provider) ||
        fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
        // Providers without a wait descriptor (shm), or with one never signalled or not
        // wanted, are polled.
        cq_attr.wait_obj = FI_WAIT_NONE;
        if ((rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr)) != 0) return fail("fi_cq_open", rc);
    } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
        wait_fd_ = -1;
    }
    if ((rc = fi_endpoint(domain_, info_, &ep_, nullptr)) != 0) return fail("fi_endpoint", rc);
    if ((rc = fi_ep_bind(ep_, &av_->fid, 0)) != 0) return fail("fi_ep_bind(av)", rc);
    if ((rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)) != 0)
        return fail("fi_ep_bind(cq)", rc);
    if ((rc = fi_enable(ep_)) != 0) return fail("fi_enable", rc);
    std::size_t length = 0;
    fi_getname(&ep_->fid, nullptr, &length);
    name_.resize(length);
    if ((rc = fi_getname(&ep_->fid, name_.data(), &length)) != 0) return fail("fi_getname", rc);
    name_.resize(length);
    if (tags_in_data_) {
        const support::keys::Nonce random = support::keys::fresh_nonce();
        std::memcpy(&token_, random.data(), sizeof token_);
        token_ |= 1;  // odd, so never 0, which means "no token"
        inject_scratch_.resize(info_->tx_attr->inject_size);
    }
    return 0;
}

int Fabric::keep_domain(const std::string& domain, std::string& why) {
    // rxm passes a domain name on to its core provider without filtering by it, so the entry
    // is picked here, and a domain the node lacks is an error rather than the first one found.
    const support::Libfabric& lib = support::fi();
    std::vector<std::string> found;
    for (const fi_info* entry = info_; entry != nullptr; entry = entry->next) {
        const char* name = entry->domain_attr != nullptr ? entry->domain_attr->name : nullptr;
        if (name == nullptr) continue;
        if (domain == name) {
            fi_info* kept = lib.dupinfo(entry);
            if (kept == nullptr) return -BMI_ENOMEM;
            lib.freeinfo(info_);
            info_ = kept;
            return 0;
        }
        // Each domain once, however many entries (endpoint types, versions) it has.
        if (std::find(found.begin(), found.end(), name) == found.end()) found.emplace_back(name);
    }
    std::string names;
    for (const auto& name : found) names += (names.empty() ? "" : ", ") + name;
    why = "no domain " + domain + " (this node has: " + (names.empty() ? "none" : names) + ")";
    return -BMI_EADDRNOTAVAIL;
}

ssize_t Fabric::post_buffer(void* data, std::size_t length, void* desc, std::uint64_t ignore,
                            std::uint64_t* token, void* context) {
    if (!tags_in_data_)
        return fi_trecv(ep_, data, length, desc, FI_ADDR_UNSPEC, 0, ignore, context);
    *token = 0;
    iovec parts[2] = {{token, sizeof *token}, {data, length}};
    void* descs[2] = {nullptr, desc};
    return fi_recvv(ep_, parts, descs, 2, FI_ADDR_UNSPEC, context);
}

ssize_t Fabric::send_small(const void* data, std::size_t length, void* desc, fi_addr_t to,
                           std::uint64_t tag, void* context) {
    if (!tags_in_data_) return fi_tsend(ep_, data, length, desc, to, tag, context);
    iovec parts[2] = {{&token_, sizeof token_}, {const_cast<void*>(data), length}};
    void* descs[2] = {nullptr, desc};
    fi_msg message{};
    message.msg_iov = parts;
    message.desc = descs;
    message.iov_count = 2;
    message.addr = to;
    message.context = context;
    message.data = tag;
    return fi_sendmsg(ep_, &message, FI_REMOTE_CQ_DATA);
}

std::size_t Fabric::inject_limit() const {
    const std::size_t limit = info_->tx_attr->inject_size;
    if (!tags_in_data_) return limit;
    return limit > sizeof token_ ? limit - sizeof token_ : 0;
}

void Fabric::close_endpoint() { close_fid(ep_); }

ssize_t Fabric::drop_unasked(std::uint64_t tag, std::uint64_t ignore, void* context) {
    fi_msg_tagged msg{};
    msg.addr = FI_ADDR_UNSPEC;
    msg.tag = tag;
    msg.ignore = ignore;
    msg.context = context;
    return fi_trecvmsg(ep_, &msg, FI_PEEK | FI_DISCARD);
}

ssize_t Fabric::inject_small(const void* data, std::size_t length, fi_addr_t to,
                             std::uint64_t tag) {
    if (!tags_in_data_) return fi_tinject(ep_, data, length, to, tag);
    // One buffer, as fi_injectdata takes, copied at once: the scratch is free again on return.
    if (length > inject_limit()) return -FI_EMSGSIZE;
    std::memcpy(inject_scratch_.data(), &token_, sizeof token_);
    if (length != 0) std::memcpy(inject_scratch_.data() + sizeof token_, data, length);
    return fi_injectdata(ep_, inject_scratch_.data(), sizeof token_ + length, tag, to);
}

bool Fabric::can_sleep() const {
    fid* object = &cq_->fid;
    fid_fabric* fabric = fabric_;
    return fi_trywait(fabric, &object, 1) == FI_SUCCESS;
}

Fabric::~Fabric() {
    close_fid(ep_);
    close_fid(cq_);
    close_fid(av_);
    close_fid(domain_);
    close_fid(fabric_);
    if (info_ != nullptr) support::fi().freeinfo(info_);
}

}  // namespace bmi::method::ofi
