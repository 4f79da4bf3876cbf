// SPDX-License-Identifier: LGPL-2.1-or-later
// The one process-wide Instance behind both C API dialects (c_api.cpp: OrangeFS's bmi.h,
// c_api_standalone.cpp: the standalone library's). Whichever dialect's BMI_initialize ran
// creates it; both dialects' other entry points then drive the same instance.
#pragma once

#include <new>

#include "bmi-types.h"
#include "bmi/core/instance.hpp"

namespace bmi::core::c_api {

// The instance, or nullptr before BMI_initialize and after BMI_finalize.
Instance* global_instance();

// Creates the global instance; -BMI_EALREADY if one exists.
int initialize(const InitParams& params);

// Runs f(instance) with exceptions turned into codes; -BMI_EINVAL before BMI_initialize.
template <class F>
int with_instance(F&& f) {
    Instance* instance = global_instance();
    if (instance == nullptr) return -BMI_EINVAL;
    try {
        return f(*instance);
    } catch (const std::bad_alloc&) {
        return -BMI_ENOMEM;
    }
}

// A post request of the C API's arguments (everything but lists).
PostRequest request_of(method::OpKind kind, BMI_addr_t addr, const void* buffer, bmi_size_t size,
                       bmi_msg_tag_t tag, void* user_ptr, bmi_context_id context);

// Posts one request; -BMI_EINVAL for a null id.
int post_one(bmi_op_id_t* id, const PostRequest& request, bmi_size_t* actual);

// An unexpected send of a list (either dialect's _list call); list_count must be >= 1.
int post_unexpected_list(bmi_op_id_t* id, BMI_addr_t dest, const void* const* buffer_list,
                         const bmi_size_t* size_list, int list_count, bmi_size_t total_size,
                         bmi_msg_tag_t tag, std::uint8_t msg_class, void* user_ptr,
                         bmi_context_id context_id);

// BMI_testunexpected of either dialect; msg_class nullopt takes every class.
int test_unexpected(int incount, int* outcount, BMI_unexpected_info* info_array,
                    std::optional<std::uint8_t> msg_class, int max_idle_time_ms);

}  // namespace bmi::core::c_api
