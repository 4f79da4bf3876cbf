// SPDX-License-Identifier: LGPL-2.1-or-later
// Compiled against bmi-standalone/ only: each function the standalone header declares has the
// standalone BMI library's signature, the constants its values, and every call links to the
// one libbmi (the pointers below make the linker resolve each symbol).
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "bmi.h"

#define SAME_TYPE(fn, type) static_assert(std::is_same_v<decltype(&fn), type>, #fn)

SAME_TYPE(BMI_initialize, int (*)(const char*, const char*, int));
SAME_TYPE(BMI_addr_lookup, int (*)(BMI_addr_t*, const char*));
SAME_TYPE(BMI_get_info, int (*)(BMI_addr_t, int, void*));
SAME_TYPE(BMI_set_info, int (*)(BMI_addr_t, int, void*));
SAME_TYPE(BMI_post_sendunexpected_class,
          int (*)(bmi_op_id_t*, BMI_addr_t, const void*, bmi_size_t, enum bmi_buffer_type,
                  bmi_msg_tag_t, uint8_t, void*, bmi_context_id, bmi_hint));
SAME_TYPE(BMI_post_sendunexpected_list_class,
          int (*)(bmi_op_id_t*, BMI_addr_t, const void* const*, const bmi_size_t*, int, bmi_size_t,
                  enum bmi_buffer_type, bmi_msg_tag_t, uint8_t, void*, bmi_context_id, bmi_hint));
SAME_TYPE(BMI_testunexpected_class, int (*)(int, int*, struct BMI_unexpected_info*, uint8_t, int));

static_assert(BMI_MAX_ADDR_LEN == 256);
static_assert(BMI_TRUSTED_CONNECTION == 9 && BMI_GET_UNEXP_SIZE == 10 &&
              BMI_ZOID_POST_TIMEOUT == 16 && BMI_TRANSPORT_METHODS_STRING == 17 &&
              BMI_TCP_GET_PORT == 18);
static_assert(BMI_ECANCEL == ((1 | (1 << 29) | (1 << 30)) | (1 << 7)));

int main() {
    void (*const linked[])() = {
        reinterpret_cast<void (*)()>(&BMI_initialize),
        reinterpret_cast<void (*)()>(&BMI_addr_lookup),
        reinterpret_cast<void (*)()>(&BMI_get_info),
        reinterpret_cast<void (*)()>(&BMI_set_info),
        reinterpret_cast<void (*)()>(&BMI_post_sendunexpected_class),
        reinterpret_cast<void (*)()>(&BMI_post_sendunexpected_list_class),
        reinterpret_cast<void (*)()>(&BMI_testunexpected_class),
    };
    for (auto fn : linked)
        if (fn == nullptr) return 1;
    // Before BMI_initialize: the dialect's own calls answer as the standalone library does.
    if (BMI_get_info(0, BMI_CHECK_INIT, nullptr) != -BMI_ENODEV) return 1;
    char* methods = nullptr;
    int count = BMI_get_info(0, BMI_TRANSPORT_METHODS_STRING, &methods);
    std::printf("methods: %d \"%s\"\n", count, methods ? methods : "");
    std::free(methods);
    return count >= 1 ? 0 : 1;
}
