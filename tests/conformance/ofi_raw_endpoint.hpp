// SPDX-License-Identifier: LGPL-2.1-or-later
// An ofi endpoint of a test's own on a server's provider (tcp;ofi_rxm or verbs;ofi_rxm on the
// server's host, or shm under a name of its own), through the method's Fabric, that speaks the
// ofi wire by hand: the peer rules' attacker and the encryption tests' key holder.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "methods/method_config.hpp"

#if BMI_METHOD_OFI
#include "methods/ofi/ofi_address.hpp"
#include "methods/ofi/ofi_fabric.hpp"
#include "methods/ofi/ofi_memory.hpp"
#include "methods/ofi/ofi_wire.hpp"

namespace bmi::test {

class OfiRawEndpoint {
public:
    // Opens an endpoint toward the server listening at `address` and posts its buffers.
    explicit OfiRawEndpoint(const std::string& address);
    ~OfiRawEndpoint();
    OfiRawEndpoint(const OfiRawEndpoint&) = delete;
    OfiRawEndpoint& operator=(const OfiRawEndpoint&) = delete;

    bool usable() const { return ready_; }
    // Sends `body` under `tag` (its bytes kept until the endpoint closes); false if the
    // provider refused it.
    bool send_tagged(std::uint64_t tag, const std::vector<std::byte>& body);
    bool send(method::ofi::Kind kind, const std::vector<std::byte>& body,
              std::uint32_t bmi_tag = 0) {
        return send_tagged(method::ofi::control_tag(kind, bmi_tag), body);
    }
    // Reads completions for up to ms: the body of the first message of `kind` that came.
    std::optional<std::vector<std::byte>> await(method::ofi::Kind kind, int ms);
    // The token the last message await() returned carried (Fabric::token; 0 off shm).
    std::uint64_t last_token() const { return last_token_; }
    // Reads what completed, then sleeps sleep_ms if no message came: the kind of the last one.
    std::optional<method::ofi::Kind> drain(int sleep_ms);
    // Reads completions until `goal` sends in all have ended (completed or failed), for up to
    // 10 s.
    bool sends_end(std::uint64_t goal);
    std::uint64_t sends_done() const { return sends_done_; }
    // The descriptor of memory a send of the caller's own takes, where the provider needs
    // one (its registration lives until the endpoint closes); false if it cannot be made.
    bool describe(void* data, std::size_t size, void*& desc);

    method::ofi::Fabric& fabric() { return fabric_; }
    method::ofi::Registrations& registrations() { return registrations_; }
    fi_addr_t server() const { return server_; }

private:
    struct Slot {
        fi_context2 context{};
        std::array<std::byte, 16384> bytes{};
        void* desc = nullptr;
        fid_mr* own_mr = nullptr;
        std::uint64_t token = 0;  // shm: the sender's (Fabric::token)
    };
    bool insert_server(const method::ofi::OfiAddress& target);
    bool post(Slot& slot);

    method::ofi::Fabric fabric_;
    fi_addr_t server_ = FI_ADDR_NOTAVAIL;
    std::string shm_address_;  // ours, on shm: listed as this process's (ofi_shm.hpp)
    std::array<Slot, 8> slots_{};
    std::deque<std::vector<std::byte>> sent_;  // bodies kept until the endpoint closes
    std::deque<fi_context2> send_contexts_;
    method::ofi::Registrations registrations_;
    std::deque<fid_mr*> sent_mrs_;  // the bodies' registrations, where the provider needs them
    std::uint64_t last_token_ = 0;
    std::uint64_t sends_done_ = 0;  // completions of sends (those of slots_ are receives)
    std::optional<std::vector<std::byte>> last_body_;
    bool ready_ = false;
};

}  // namespace bmi::test
#endif
