// SPDX-License-Identifier: LGPL-2.1-or-later
// One instance's libfabric objects: fabric, domain, address vector, completion queue and one
// reliable-datagram endpoint, opened together and closed in the reverse order.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "methods/ofi/ofi_address.hpp"

namespace bmi::method::ofi {

// What an allocated plane (doc/planes.md) asks of the provider's endpoint.
struct FabricChoice {
    std::string domain;               // "" = the provider's first
    std::uint32_t tclass = 0;         // libfabric traffic class; 0 = unspecified
    std::vector<std::byte> auth_key;  // the domain's authorization key (ofi_auth_key); empty: none
    bool wait_descriptor = true;      // ofi_wait_descriptor: false opens the queue without one
};

class Fabric {
public:
    Fabric() = default;
    ~Fabric();
    Fabric(const Fabric&) = delete;
    Fabric& operator=(const Fabric&) = delete;

    // Opens everything for `address`'s provider: bound to its node and service when `bind`,
    // where the provider likes otherwise; asks for sends up to inject_bytes to be copied at once.
    // 0, or -BMI_E* with `why` saying what failed.
    int open(const OfiAddress& address, bool bind, std::size_t cq_size, std::size_t inject_bytes,
             const FabricChoice& choice, std::string& why);

    fid_ep* ep() const { return ep_; }
    fid_cq* cq() const { return cq_; }
    fid_av* av() const { return av_; }
    fid_domain* domain() const { return domain_; }
    // The provider needs memory registered for local access (FI_MR_LOCAL: verbs).
    bool needs_local_mr() const { return (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0; }
    // Closes the endpoint alone, ending every operation in it: registrations of memory posted
    // to it may go after this, and must go before the domain closes (the destructor).
    void close_endpoint();
    const fi_info& info() const { return *info_; }
    // The endpoint's own address as the provider writes it (what a peer inserts).
    const std::vector<std::byte>& name() const { return name_; }
    // The completion queue's wait descriptor, or -1 where the provider has none.
    int wait_fd() const { return wait_fd_; }
    // fi_trywait on the completion queue: true if a sleep on wait_fd() will see new work.
    bool can_sleep() const;
    // Whether the address of a peer endpoint of this process that has closed may still be
    // removed. libfabric's shm reaches such a peer through the peer's own mapping of its
    // region; 1.17 leaves that mapping behind at the peer's close, 2.x unmaps it, and its
    // fi_av_remove then reads the unmapped region (a crash). Versions between are not known.
    static bool removes_closed_local_peers();

    // Control and eager messages, and the buffers they land in. They are tagged messages, but
    // on shm they go untagged with the tag as remote CQ data: libfabric 1.17's shm matches a
    // tagged message that waited for its receive by the mask of an earlier receive, so a
    // buffer that takes any tag misses most of them. On shm each also carries this endpoint's
    // token before its body, which a buffer's receive puts in `token`.
    ssize_t post_buffer(void* data, std::size_t length, void* desc, std::uint64_t ignore,
                        std::uint64_t* token, void* context);
    ssize_t send_small(const void* data, std::size_t length, void* desc, fi_addr_t to,
                       std::uint64_t tag, void* context);
    ssize_t inject_small(const void* data, std::size_t length, fi_addr_t to, std::uint64_t tag);
    // Whether the provider keeps messages no receive matched in a queue of its own that it does
    // not bound (rxm: tcp, verbs), which drop_unasked can empty.
    bool keeps_unasked() const { return keeps_unasked_; }
    // Drops the first message of tag/ignore waiting in that queue (FI_PEEK | FI_DISCARD): a
    // completion to `context` if there was one, else an error completion -FI_ENOMSG.
    ssize_t drop_unasked(std::uint64_t tag, std::uint64_t ignore, void* context);
    // The tag of a filled buffer's message.
    std::uint64_t tag_of(const fi_cq_tagged_entry& entry) const {
        return tags_in_data_ ? entry.data : entry.tag;
    }
    // The length of a filled buffer's message without the token (0 if it had none).
    std::size_t body_length(const fi_cq_tagged_entry& entry) const {
        if (!tags_in_data_) return entry.len;
        return entry.len >= sizeof token_ ? entry.len - sizeof token_ : 0;
    }
    // shm names a message's source by an index the sender's command carries, which any
    // endpoint may write: a random number of this endpoint's, fixed while it is open, lets a
    // peer tell our messages from those that only name us. 0 where the provider's source
    // stands (a connection's: tcp, verbs), and in a message too short to hold one.
    std::uint64_t token() const { return token_; }
    // The most inject_small takes, the token included.
    std::size_t inject_limit() const;

    // fi_strerror's text for a negative libfabric code.
    static std::string error_text(int code);

private:
    // Keeps only the fi_getinfo entry of `domain`: 0, or -BMI_EADDRNOTAVAIL with `why`.
    int keep_domain(const std::string& domain, std::string& why);
    fi_info* info_ = nullptr;
    fid_fabric* fabric_ = nullptr;
    fid_domain* domain_ = nullptr;
    fid_av* av_ = nullptr;
    fid_cq* cq_ = nullptr;
    fid_ep* ep_ = nullptr;
    int wait_fd_ = -1;
    bool tags_in_data_ = false;
    bool keeps_unasked_ = false;
    std::uint64_t token_ = 0;
    std::vector<std::byte> inject_scratch_;  // shm: the token and a body, for fi_injectdata
    std::vector<std::byte> name_;
};

// A libfabric code as the BMI error an operation ends with.
int bmi_error(int fi_code);

}  // namespace bmi::method::ofi
