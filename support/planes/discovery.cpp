// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/discovery.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "support/planes/cidr.hpp"
#include "support/planes_config.hpp"
#if BMI_PLANES_VERBS
#include "support/optional_library/ibverbs.hpp"
#endif
#if BMI_PLANES_OFI
#include <rdma/fabric.h>

#include "support/optional_library/libfabric.hpp"
#endif

namespace bmi::support::planes {

namespace {
const void* address_bytes(const sockaddr* sa) {
    if (sa->sa_family == AF_INET) return &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr;
    return &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
}

void add_once(std::vector<Plane>& planes, Plane plane) {
    const bool known = std::any_of(planes.begin(), planes.end(), [&](const Plane& p) {
        return p.type == plane.type && p.identifier == plane.identifier;
    });
    if (!known) planes.push_back(std::move(plane));
}

void discover_ip(std::vector<Plane>& planes) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return;
    for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == nullptr || ifa->ifa_netmask == nullptr) continue;
        const int family = ifa->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        if ((ifa->ifa_flags & IFF_UP) == 0) continue;
        const Cidr subnet =
            subnet_of(family, address_bytes(ifa->ifa_addr), address_bytes(ifa->ifa_netmask));
        add_once(planes,
                 {PlaneType::tcp, subnet.text(), "", "interface " + std::string(ifa->ifa_name)});
    }
    freeifaddrs(list);
}

#if BMI_PLANES_VERBS
void discover_verbs(std::vector<Plane>& planes) {
    if (load_ibverbs(nullptr) == nullptr) return;
    int count = 0;
    ibv_device** devices = ibv().get_device_list(&count);
    if (devices == nullptr) return;
    for (int i = 0; i < count; ++i) {
        const std::string name = ibv().get_device_name(devices[i]);
        ibv_context* ctx = ibv().open_device(devices[i]);
        if (ctx == nullptr) continue;
        ibv_device_attr attr{};
        if (ibv().query_device(ctx, &attr) == 0) {
            for (unsigned port = 1; port <= attr.phys_port_cnt; ++port) {
                const std::string id = name + ":" + std::to_string(port);
                add_once(planes, {PlaneType::verbs, id, "",
                                  "rdma device " + name + " port " + std::to_string(port)});
            }
        }
        ibv().close_device(ctx);
    }
    ibv().free_device_list(devices);
}
#endif

#if BMI_PLANES_OFI
// What bmi_ofi can open: tagged reliable datagrams. A plane names the core provider (the part
// before ';' of "tcp;ofi_rxm") and its domain; shm's one domain is the node, so it is "shm".
void discover_ofi(std::vector<Plane>& planes) {
    const Libfabric* lib = load_libfabric(nullptr);
    if (lib == nullptr) return;
    fi_info* hints = lib->dupinfo(nullptr);
    if (hints == nullptr) return;
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    fi_info* list = nullptr;
    const int rc = lib->getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &list);
    lib->freeinfo(hints);
    if (rc != 0) return;
    for (const fi_info* info = list; info != nullptr; info = info->next) {
        if (info->fabric_attr == nullptr || info->fabric_attr->prov_name == nullptr) continue;
        // Appended piece by piece: gcc 12 -O3 misreads a concatenation here (-Wrestrict).
        const std::string_view name = info->fabric_attr->prov_name;
        const std::string_view provider = name.substr(0, name.find(';'));
        const char* domain = info->domain_attr != nullptr ? info->domain_attr->name : nullptr;
        std::string id(provider);
        if (provider != "shm" && domain != nullptr) {
            id.push_back('/');
            id.append(domain);
        }
        add_once(planes, {PlaneType::ofi, id, "", "libfabric (fi_getinfo)"});
    }
    lib->freeinfo(list);
}
#endif
}  // namespace

bool discovers_verbs(std::string* why) {
#if BMI_PLANES_VERBS
    return load_ibverbs(why) != nullptr;
#else
    if (why != nullptr) *why = "built without libibverbs";
    return false;
#endif
}

std::vector<Plane> discover_planes() {
    std::vector<Plane> planes;
    discover_ip(planes);
#if BMI_PLANES_VERBS
    discover_verbs(planes);
#endif
#if BMI_PLANES_OFI
    discover_ofi(planes);
#endif
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0)
        planes.push_back({PlaneType::shm, host, "", "this node (shared memory)"});
    return planes;
}

}  // namespace bmi::support::planes
