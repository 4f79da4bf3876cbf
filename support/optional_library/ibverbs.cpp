// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/ibverbs.hpp"

#include <cstddef>
#include <cstring>

#include "support/optional_library/optional_library.hpp"

namespace bmi::support {

namespace {
Ibverbs ibverbs_table;

void fill(SymbolFiller& take, Ibverbs& t) {
    take(t.get_device_list, "ibv_get_device_list");
    take(t.free_device_list, "ibv_free_device_list");
    take(t.get_device_name, "ibv_get_device_name");
    take(t.open_device, "ibv_open_device");
    take(t.close_device, "ibv_close_device");
    take(t.query_device, "ibv_query_device");
    take(t.query_port_compat, "ibv_query_port");
    take(t.query_gid, "ibv_query_gid");
    take(t.alloc_pd, "ibv_alloc_pd");
    take(t.dealloc_pd, "ibv_dealloc_pd");
    take(t.reg_mr, "ibv_reg_mr");
    take(t.dereg_mr, "ibv_dereg_mr");
    take(t.create_comp_channel, "ibv_create_comp_channel");
    take(t.destroy_comp_channel, "ibv_destroy_comp_channel");
    take(t.create_cq, "ibv_create_cq");
    take(t.destroy_cq, "ibv_destroy_cq");
    take(t.get_cq_event, "ibv_get_cq_event");
    take(t.ack_cq_events, "ibv_ack_cq_events");
    take(t.create_srq, "ibv_create_srq");
    take(t.destroy_srq, "ibv_destroy_srq");
    take(t.create_qp, "ibv_create_qp");
    take(t.modify_qp, "ibv_modify_qp");
    take(t.destroy_qp, "ibv_destroy_qp");
    take(t.get_async_event, "ibv_get_async_event");
    take(t.ack_async_event, "ibv_ack_async_event");
    take(t.event_type_str, "ibv_event_type_str");
    take(t.wc_status_str, "ibv_wc_status_str");
}
}  // namespace

const Ibverbs* load_ibverbs(std::string* why) {
    static OptionalLibrary library({ibverbs_file});
    return load_table(library, ibverbs_table, fill, why);
}

const Ibverbs& ibv() { return ibverbs_table; }

int query_port(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) {
    // verbs.h's verbs_get_ctx_op, written out: the macro is a GNU statement expression,
    // which clang's -Wpedantic -Werror (the thread-safety build) refuses.
    verbs_context* extended = verbs_get_ctx(context);
    if (extended != nullptr &&
        extended->sz >= sizeof *extended - offsetof(verbs_context, query_port) &&
        extended->query_port != nullptr)
        return extended->query_port(context, port, attr, sizeof *attr);
    std::memset(attr, 0, sizeof *attr);
    return ibverbs_table.query_port_compat(context, port,
                                           reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace bmi::support
