// SPDX-License-Identifier: LGPL-2.1-or-later
// The entry points only the standalone BMI library's bmi.h has (bmi/include/bmi-standalone):
// the message-class calls, and the four calls whose signature or option numbers differ from
// OrangeFS's, which that header renames to BMI_standalone_* so both dialects live in one
// libbmi without a symbol clash. Every other call is shared with the OrangeFS dialect
// (c_api.cpp): the types, error codes and semantics are the same.
#include <cstdlib>
#include <cstring>
#include <string>

#include "bmi/core/c_api_global.hpp"
#include "methods/method_table.hpp"

namespace {

using namespace bmi::core::c_api;

// The standalone dialect's option numbers where they differ from OrangeFS's (bmi-types.h of
// each dialect); 1-8 and 10-15 mean the same in both.
enum StandaloneOption : int {
    trusted_connection = 9,
    zoid_post_timeout = 16,
    transport_methods_string = 17,
    tcp_get_port = 18,
};
// OrangeFS's 16 (its methods string) is the standalone zoid option, which the switches below
// refuse: the instance never sees 16 under OrangeFS's meaning from this dialect.
static_assert(static_cast<int>(zoid_post_timeout) ==
              static_cast<int>(BMI_TRANSPORT_METHODS_STRING));

// BMI_TRANSPORT_METHODS_STRING as the standalone library answers it: every method this build
// contains (not only the active ones), without the "bmi_" prefix, each followed by a comma, in
// memory the caller frees; the result is the number of names. A method's alias follows it
// ("verbs,ib,"): Mercury's na_bmi accepts a protocol only if this list names it.
int methods_string_of_build(void* out) {
    if (out == nullptr) return -BMI_EINVAL;
    std::string text;
    int count = 0;
    for (const auto& method : bmi::method::compiled_methods()) {
        for (std::string_view scheme : {method.scheme, method.alias_scheme}) {
            if (scheme.empty()) continue;
            text += scheme;
            text += ',';
            ++count;
        }
    }
    char* copy = static_cast<char*>(std::malloc(text.size() + 1));
    if (copy == nullptr) return -BMI_ENOMEM;
    std::memcpy(copy, text.c_str(), text.size() + 1);
    *static_cast<char**>(out) = copy;
    return count;
}

}  // namespace

extern "C" {

int BMI_standalone_initialize(const char* method_list, const char* listen_addr, int flags) {
    try {
        bmi::core::InitParams params;
        params.method_list = method_list ? method_list : "";
        params.listen = listen_addr ? listen_addr : "";
        params.flags = flags;
        params.dialect = bmi::method::ApiDialect::standalone;
        return initialize(params);
    } catch (const std::bad_alloc&) {
        return -BMI_ENOMEM;
    }
}

int BMI_standalone_addr_lookup(BMI_addr_t* new_addr, const char* id_string) {
    if (new_addr == nullptr || id_string == nullptr) return -BMI_EINVAL;
    return with_instance(
        [&](bmi::core::Instance& in) { return in.addr_lookup(id_string, *new_addr); });
}

int BMI_standalone_get_info(BMI_addr_t addr, int option, void* inout_parameter) {
    switch (option) {
        case BMI_CHECK_INIT:
            return global_instance() ? 0 : -BMI_ENODEV;
        case transport_methods_string:
            return methods_string_of_build(inout_parameter);
        case tcp_get_port:
            if (addr != 0 || inout_parameter == nullptr) return -BMI_EINVAL;
            return with_instance([&](bmi::core::Instance& in) {
                return in.get_info(0, bmi::method::info_listen_port, inout_parameter);
            });
        case trusted_connection:
        case zoid_post_timeout:
            return -BMI_ENOSYS;
        default:
            return with_instance([&](bmi::core::Instance& in) {
                return in.get_info(addr, option, inout_parameter);
            });
    }
}

int BMI_standalone_set_info(BMI_addr_t addr, int option, void* inout_parameter) {
    switch (option) {
        case trusted_connection:
        case zoid_post_timeout:
            return -BMI_ENOSYS;
        case transport_methods_string:
        case tcp_get_port:
            return -BMI_EINVAL;  // read-only
        default:
            return with_instance([&](bmi::core::Instance& in) {
                return in.set_info(addr, option, inout_parameter);
            });
    }
}

int BMI_post_sendunexpected_class(bmi_op_id_t* id, BMI_addr_t dest, const void* buffer,
                                  bmi_size_t size, enum bmi_buffer_type, bmi_msg_tag_t tag,
                                  std::uint8_t msg_class, void* user_ptr, bmi_context_id context_id,
                                  bmi_hint) {
    auto r = request_of(bmi::method::OpKind::send_unexpected, dest, buffer, size, tag, user_ptr,
                        context_id);
    r.msg_class = msg_class;
    return post_one(id, r, nullptr);
}

int BMI_post_sendunexpected_list_class(bmi_op_id_t* id, BMI_addr_t dest,
                                       const void* const* buffer_list, const bmi_size_t* size_list,
                                       int list_count, bmi_size_t total_size, enum bmi_buffer_type,
                                       bmi_msg_tag_t tag, std::uint8_t msg_class, void* user_ptr,
                                       bmi_context_id context_id, bmi_hint) {
    return post_unexpected_list(id, dest, buffer_list, size_list, list_count, total_size, tag,
                                msg_class, user_ptr, context_id);
}

int BMI_testunexpected_class(int incount, int* outcount, struct BMI_unexpected_info* info_array,
                             std::uint8_t msg_class, int max_idle_time_ms) {
    return test_unexpected(incount, outcount, info_array, msg_class, max_idle_time_ms);
}

}  // extern "C"
