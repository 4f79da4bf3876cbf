// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bmi/tools/bmi_info_fabric.hpp"

#include <set>
#include <string>

#include "bmi/tools/bmi_info_config.hpp"
#if BMI_INFO_OFI
#include <rdma/fabric.h>

#include "methods/ofi/ofi_address.hpp"
#include "support/optional_library/libfabric.hpp"
#endif

namespace bmi::info {

#if BMI_INFO_OFI
namespace {
std::string_view endpoint_type(fi_ep_type type) {
    switch (type) {
        case FI_EP_MSG:
            return "msg";
        case FI_EP_RDM:
            return "rdm";
        case FI_EP_DGRAM:
            return "dgram";
        default:
            return "other";
    }
}

// How bmi_ofi addresses the provider's endpoints (doc/methods/ofi.md, "Addresses").
std::string address_form(std::string_view prov_name) {
    const std::string core(prov_name.substr(0, prov_name.find(';')));
    if (core == "shm") return "ofi+shm://NAME";
    if (method::ofi::socket_addressed(core)) return "ofi+" + core + "://HOST:PORT";
    return "ofi+" + core + "://0x... (listen on ofi+" + core + "://[DOMAIN])";
}
}  // namespace

int print_fabric_providers(std::ostream& out) {
    std::string why;
    const support::Libfabric* lib = support::load_libfabric(&why);
    if (lib == nullptr) {
        out << "  libfabric cannot be opened: " << why << "\n";
        return 0;
    }
    fi_info* list = nullptr;
    if (int rc = lib->getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &list); rc != 0) {
        out << "  fi_getinfo found none: " << lib->strerror(-rc) << "\n";
        return 0;
    }
    // fi_getinfo lists a provider once per domain and address format: one line each.
    std::set<std::string> seen;
    for (const fi_info* info = list; info != nullptr; info = info->next) {
        const std::string provider = info->fabric_attr->prov_name;
        const std::string_view type = endpoint_type(info->ep_attr->type);
        if (!seen.insert(provider + " " + std::string(type)).second) continue;
        const bool usable = info->ep_attr->type == FI_EP_RDM && (info->caps & FI_TAGGED) != 0;
        out << "  " << provider << " (" << type << ")"
            << ((info->caps & FI_TAGGED) != 0 ? " tagged" : "")
            << ((info->caps & FI_RMA) != 0 ? " rma" : "")
            << ((info->domain_attr->mr_mode & FI_MR_LOCAL) != 0 ? " mr-local" : "")
            << (usable ? "  as " + address_form(provider)
                       : std::string("  (not for bmi_ofi, which needs tagged rdm)"))
            << "\n";
    }
    lib->freeinfo(list);
    return static_cast<int>(seen.size());
}
#else
int print_fabric_providers(std::ostream& out) {
    out << "  none: libbmi was built without libfabric (Meson feature ofi)\n";
    return 0;
}
#endif

}  // namespace bmi::info
