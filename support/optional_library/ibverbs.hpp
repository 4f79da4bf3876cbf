// SPDX-License-Identifier: LGPL-2.1-or-later
// libibverbs through a table filled by dlopen (optional_library.hpp), for the verbs method and
// plane discovery. Only the functions libibverbs exports are here: the data path
// (ibv_post_send, ibv_post_srq_recv, ibv_poll_cq, ibv_req_notify_cq) is inline in verbs.h and
// goes through the device context's own ops.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace bmi::support {

struct Ibverbs {
    decltype(&::ibv_get_device_list) get_device_list;
    decltype(&::ibv_free_device_list) free_device_list;
    decltype(&::ibv_get_device_name) get_device_name;
    decltype(&::ibv_open_device) open_device;
    decltype(&::ibv_close_device) close_device;
    decltype(&::ibv_query_device) query_device;
    decltype(&::ibv_query_port) query_port_compat;  // use query_port() below
    decltype(&::ibv_query_gid) query_gid;
    decltype(&::ibv_alloc_pd) alloc_pd;
    decltype(&::ibv_dealloc_pd) dealloc_pd;
    decltype(&::ibv_reg_mr) reg_mr;
    decltype(&::ibv_dereg_mr) dereg_mr;
    decltype(&::ibv_create_comp_channel) create_comp_channel;
    decltype(&::ibv_destroy_comp_channel) destroy_comp_channel;
    decltype(&::ibv_create_cq) create_cq;
    decltype(&::ibv_destroy_cq) destroy_cq;
    decltype(&::ibv_get_cq_event) get_cq_event;
    decltype(&::ibv_ack_cq_events) ack_cq_events;
    decltype(&::ibv_create_srq) create_srq;
    decltype(&::ibv_destroy_srq) destroy_srq;
    decltype(&::ibv_create_qp) create_qp;
    decltype(&::ibv_modify_qp) modify_qp;
    decltype(&::ibv_destroy_qp) destroy_qp;
    decltype(&::ibv_get_async_event) get_async_event;
    decltype(&::ibv_ack_async_event) ack_async_event;
    decltype(&::ibv_event_type_str) event_type_str;
    decltype(&::ibv_wc_status_str) wc_status_str;
};

// The file handed to dlopen, for messages and tests.
inline constexpr const char* ibverbs_file = "libibverbs.so.1";

// Opens libibverbs on the first call in the process and fills the table; every later call
// returns the first answer. nullptr when the library is absent or lacks a function: `why` (if
// given) then names the library and the reason. Thread-safe.
const Ibverbs* load_ibverbs(std::string* why);

// The table, once load_ibverbs() has returned it: the verbs method loads it before it opens a
// device, and nothing reaches a verbs object without one.
const Ibverbs& ibv();

// ibv_query_port as verbs.h's inline does it: the context's extended op when the provider has
// one (the whole ibv_port_attr), else the exported function (its older, shorter layout).
int query_port(ibv_context* context, std::uint8_t port, ibv_port_attr* attr);

}  // namespace bmi::support
