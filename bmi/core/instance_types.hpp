// SPDX-License-Identifier: LGPL-2.1-or-later
// What the two APIs hand an Instance and get back: initialize's parameters, a post's request,
// a completion and an unexpected message.
#pragma once

#include <cstdint>
#include <string>

#include "bmi-types.h"
#include "methods/method.hpp"

namespace bmi::core {

struct InitParams {
    std::string method_list;  // "bmi_tcp,bmi_shm"; empty: every compiled method
    std::string listen;       // "tcp://0.0.0.0:3334,shm://srv"; empty: client only
    int flags = 0;            // BMI_INIT_SERVER | BMI_TCP_BIND_SPECIFIC | BMI_AUTO_REF_COUNT
    // "unexpected_quota=64M,shm_ring_slots=128": keys of the settings table
    // (support/settings/setting_table.hpp); each overrides its environment variable.
    std::string options;
    // The allocation in the text form of doc/planes.md, from the C++ API; "" leaves it to the
    // allocation settings (BMI_ALLOCATION, BMI_ALLOCATION_FILE, BMI_ALLOCATION_ID).
    std::string allocation;
    // The API this instance serves (bmi.h of OrangeFS or of the standalone library).
    method::ApiDialect dialect = method::ApiDialect::orangefs;
};

// What a post call asks for. Exactly one of (buffer) or (list) is used.
struct PostRequest {
    method::OpKind kind = method::OpKind::send;
    BMI_addr_t addr = 0;
    void* buffer = nullptr;  // contiguous; for sends never written
    const void* const* list = nullptr;
    const bmi_size_t* sizes = nullptr;
    int list_count = 0;   // 0: contiguous
    bmi_size_t size = 0;  // contiguous size, or the list total the caller announced
    bmi_msg_tag_t tag = 0;
    std::uint8_t msg_class = 0;  // send_unexpected only: the standalone dialect's class
    void* user_ptr = nullptr;
    bmi_context_id context = 0;
};

struct Completion {
    bmi_op_id_t id = 0;
    int error = 0;
    bmi_size_t actual_size = 0;
    void* user_ptr = nullptr;
};

struct UnexpectedMessage {
    int error = 0;
    BMI_addr_t addr = 0;
    void* buffer = nullptr;
    bmi_size_t size = 0;
    bmi_msg_tag_t tag = 0;
    std::uint8_t msg_class = 0;
};

}  // namespace bmi::core
