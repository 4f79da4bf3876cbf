// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-info's RDMA section; without libibverbs at build time it only says so.
#include "bmi/tools/bmi_info_rdma.hpp"

#include "bmi/tools/bmi_info_config.hpp"
#if BMI_INFO_VERBS
#include <infiniband/verbs.h>
#endif

namespace bmi::info {

#if BMI_INFO_VERBS
namespace {
const char* port_state(ibv_port_state s) {
    switch (s) {
        case IBV_PORT_DOWN:
            return "down";
        case IBV_PORT_INIT:
            return "init";
        case IBV_PORT_ARMED:
            return "armed";
        case IBV_PORT_ACTIVE:
            return "active";
        case IBV_PORT_ACTIVE_DEFER:
            return "active-defer";
        default:
            return "no-state";
    }
}

const char* link_layer(std::uint8_t l) {
    return l == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
           : l == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)"
                                          : "unspecified";
}

void print_device(std::ostream& out, ibv_device* dev) {
    out << "  " << ibv_get_device_name(dev) << " (" << ibv_node_type_str(dev->node_type) << ")";
    ibv_context* ctx = ibv_open_device(dev);
    if (ctx == nullptr) {
        out << ": cannot open (permissions on /dev/infiniband?)\n";
        return;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) != 0) {
        out << ": ibv_query_device failed\n";
        ibv_close_device(ctx);
        return;
    }
    out << ", " << int(attr.phys_port_cnt) << " port(s), max_qp " << attr.max_qp << ", max_mr_size "
        << attr.max_mr_size << "\n";
    for (std::uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, p, &pa) != 0) {
            out << "    port " << int(p) << ": ibv_query_port failed\n";
            continue;
        }
        out << "    port " << int(p) << ": " << port_state(pa.state) << ", active MTU "
            << (128 << pa.active_mtu) << ", " << link_layer(pa.link_layer) << ", " << pa.gid_tbl_len
            << " GIDs, LID " << pa.lid << "\n";
    }
    ibv_close_device(ctx);
}
}  // namespace

int print_rdma_devices(std::ostream& out) {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr || count == 0) {
        out << "  none found (libibverbs sees no device; the verbs method cannot be used)\n";
        if (list != nullptr) ibv_free_device_list(list);
        return 0;
    }
    for (int i = 0; i < count; ++i) print_device(out, list[i]);
    ibv_free_device_list(list);
    return count;
}
#else
int print_rdma_devices(std::ostream& out) {
    out << "  not probed: bmi-info was built without libibverbs (Debian: libibverbs-dev)\n";
    return 0;
}
#endif

}  // namespace bmi::info
