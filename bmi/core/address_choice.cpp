// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bmi/core/address_choice.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "bmi-types.h"
#include "methods/method_table.hpp"
#include "support/method_address/method_address.hpp"

namespace bmi::core {

namespace {

std::size_t rank_of(std::string_view scheme) {
    scheme = method::canonical_scheme(scheme);  // ib:// ranks as verbs://
    const auto* begin = std::begin(preferred_schemes);
    return static_cast<std::size_t>(std::find(begin, std::end(preferred_schemes), scheme) - begin);
}

struct Part {
    std::string_view address;
    std::string_view scheme;
    std::optional<std::string> host;  // of a "host:port" part
    bool usable = false;
    // Neither host:port nor shared memory: a fabric's own address (ofi+efa://0x...), which
    // reaches its node from anywhere on the fabric.
    bool anywhere = false;
};

}  // namespace

AddressChoice choose_address(std::string_view list,
                             const std::function<bool(std::string_view)>& usable,
                             const std::function<bool(std::string_view)>& on_this_node) {
    std::vector<Part> parts;
    for (std::string_view item : support::split_address_list(list)) {
        auto split = support::split_scheme(item);
        if (!split) return {{}, -BMI_EINVAL};
        Part part{item, split->scheme, std::nullopt, usable(split->scheme)};
        auto host_port = support::parse_host_port(split->rest);
        const bool node_local = part.scheme == "shm" ||
                                (part.scheme == "ofi" && split->variant == "shm");
        if (host_port && !node_local) part.host = host_port->host;
        part.anywhere = !host_port && part.scheme == "ofi" && !node_local;
        parts.push_back(std::move(part));
    }
    if (parts.empty()) return {{}, -BMI_EINVAL};
    // Whether the peer is on this node costs a resolver call: asked only when it decides.
    std::optional<bool> hostless_allowed;
    auto allowed = [&](const Part& part) {
        if (part.host || part.anywhere) return true;
        if (!hostless_allowed) {
            bool names_host = false, names_this_node = false;
            for (const Part& other : parts) {
                if (!other.host) continue;
                names_host = true;
                if (on_this_node(*other.host)) {
                    names_this_node = true;
                    break;
                }
            }
            hostless_allowed = !names_host || names_this_node;
        }
        return *hostless_allowed;
    };
    const Part* best = nullptr;
    for (const Part& part : parts) {
        if (!part.usable) continue;
        if (best != nullptr && rank_of(part.scheme) >= rank_of(best->scheme)) continue;
        if (allowed(part)) best = &part;
    }
    if (best == nullptr) return {{}, -BMI_ENOPROTOOPT};
    return {best->address, 0};
}

}  // namespace bmi::core
