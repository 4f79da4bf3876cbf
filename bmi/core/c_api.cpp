// SPDX-License-Identifier: LGPL-2.1-or-later
// The C API of OrangeFS's bmi.h, and the process-wide instance both C dialects share
// (c_api_global.hpp; the standalone dialect's entry points are in c_api_standalone.cpp). Each
// entry point converts arguments, calls the instance and converts the result. No exception
// crosses it.
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "bmi.h"
#include "bmi/core/c_api_global.hpp"
#include "bmi/core/instance.hpp"
#include "support/error/error_map.hpp"

namespace bmi::core::c_api {

namespace {
std::mutex init_mutex;  // serializes initialize/finalize only
std::atomic<Instance*> global{nullptr};
}  // namespace

Instance* global_instance() { return global.load(std::memory_order_acquire); }

int initialize(const InitParams& params) {
    std::lock_guard lock(init_mutex);
    if (global.load() != nullptr) return -BMI_EALREADY;
    try {
        std::unique_ptr<Instance> instance;
        int rc = Instance::create(params, instance);
        if (rc != 0) return rc;
        global.store(instance.release(), std::memory_order_release);
        return 0;
    } catch (const std::bad_alloc&) {
        return -BMI_ENOMEM;
    }
}

namespace {
int finalize() {
    std::lock_guard lock(init_mutex);
    Instance* instance = global.exchange(nullptr);
    if (instance == nullptr) return -BMI_EINVAL;
    delete instance;
    return 0;
}
}  // namespace

int post_one(bmi_op_id_t* id, const PostRequest& request, bmi_size_t* actual) {
    if (id == nullptr) return -BMI_EINVAL;
    return with_instance([&](Instance& in) { return in.post(request, *id, actual); });
}

PostRequest request_of(method::OpKind kind, BMI_addr_t addr, const void* buffer, bmi_size_t size,
                       bmi_msg_tag_t tag, void* user_ptr, bmi_context_id context) {
    PostRequest r;
    r.kind = kind;
    r.addr = addr;
    r.buffer = const_cast<void*>(buffer);  // sends never write through it
    r.size = size;
    r.tag = tag;
    r.user_ptr = user_ptr;
    r.context = context;
    return r;
}

int post_unexpected_list(bmi_op_id_t* id, BMI_addr_t dest, const void* const* buffer_list,
                         const bmi_size_t* size_list, int list_count, bmi_size_t total_size,
                         bmi_msg_tag_t tag, std::uint8_t msg_class, void* user_ptr,
                         bmi_context_id context_id) {
    if (list_count < 1) return -BMI_EINVAL;
    auto r = request_of(method::OpKind::send_unexpected, dest, nullptr, total_size, tag, user_ptr,
                        context_id);
    r.list = buffer_list;
    r.sizes = size_list;
    r.list_count = list_count;
    r.msg_class = msg_class;
    return post_one(id, r, nullptr);
}

int test_unexpected(int incount, int* outcount, BMI_unexpected_info* info_array,
                    std::optional<std::uint8_t> msg_class, int max_idle_time_ms) {
    if (outcount == nullptr || incount < 0 || (incount > 0 && info_array == nullptr))
        return -BMI_EINVAL;
    *outcount = 0;
    return with_instance([&](Instance& in) {
        std::vector<UnexpectedMessage> got(static_cast<std::size_t>(incount));
        int rc = in.testunexpected(max_idle_time_ms, *outcount, got, msg_class);
        for (int i = 0; i < *outcount; ++i) {
            const auto& m = got[static_cast<std::size_t>(i)];
            info_array[i] = BMI_unexpected_info{m.error, m.addr, m.buffer, m.size, m.tag};
        }
        return rc;
    });
}

}  // namespace bmi::core::c_api

namespace {

using bmi::core::Instance;
using bmi::method::OpKind;
using namespace bmi::core::c_api;

void copy_completion(const bmi::core::Completion& c, bmi_error_code_t* error, bmi_size_t* actual,
                     void** user_ptr) {
    if (error) *error = c.error;
    if (actual) *actual = c.actual_size;
    if (user_ptr) *user_ptr = c.user_ptr;
}

}  // namespace

extern "C" {

int BMI_initialize(const char* method_list, const char* listen_addr, int flags, char* options) {
    try {
        bmi::core::InitParams params;
        params.method_list = method_list ? method_list : "";
        params.listen = listen_addr ? listen_addr : "";
        params.flags = flags;
        params.options = options ? options : "";
        return initialize(params);
    } catch (const std::bad_alloc&) {
        return -BMI_ENOMEM;
    }
}

int BMI_finalize(void) { return finalize(); }

int BMI_open_context(bmi_context_id* context_id) {
    if (context_id == nullptr) return -BMI_EINVAL;
    return with_instance([&](Instance& in) { return in.open_context(*context_id); });
}

void BMI_close_context(bmi_context_id context_id) {
    with_instance([&](Instance& in) { return in.close_context(context_id); });
}

int BMI_post_send(bmi_op_id_t* id, BMI_addr_t dest, const void* buffer, bmi_size_t size,
                  enum bmi_buffer_type, bmi_msg_tag_t tag, void* user_ptr,
                  bmi_context_id context_id, bmi_hint) {
    return post_one(id, request_of(OpKind::send, dest, buffer, size, tag, user_ptr, context_id),
                    nullptr);
}

int BMI_post_sendunexpected(bmi_op_id_t* id, BMI_addr_t dest, const void* buffer, bmi_size_t size,
                            enum bmi_buffer_type, bmi_msg_tag_t tag, void* user_ptr,
                            bmi_context_id context_id, bmi_hint) {
    return post_one(
        id, request_of(OpKind::send_unexpected, dest, buffer, size, tag, user_ptr, context_id),
        nullptr);
}

int BMI_post_recv(bmi_op_id_t* id, BMI_addr_t src, void* buffer, bmi_size_t expected_size,
                  bmi_size_t* actual_size, enum bmi_buffer_type, bmi_msg_tag_t tag, void* user_ptr,
                  bmi_context_id context_id, bmi_hint) {
    return post_one(id,
                    request_of(OpKind::recv, src, buffer, expected_size, tag, user_ptr, context_id),
                    actual_size);
}

int BMI_test(bmi_op_id_t id, int* outcount, bmi_error_code_t* error_code, bmi_size_t* actual_size,
             void** user_ptr, int max_idle_time_ms, bmi_context_id context_id) {
    if (outcount == nullptr) return -BMI_EINVAL;
    *outcount = 0;
    return with_instance([&](Instance& in) {
        bmi::core::Completion c;
        int rc = in.test(id, context_id, max_idle_time_ms, *outcount, c);
        if (*outcount > 0) copy_completion(c, error_code, actual_size, user_ptr);
        return rc;
    });
}

int BMI_testsome(int incount, bmi_op_id_t* id_array, int* outcount, int* index_array,
                 bmi_error_code_t* error_code_array, bmi_size_t* actual_size_array,
                 void** user_ptr_array, int max_idle_time_ms, bmi_context_id context_id) {
    if (outcount == nullptr || incount < 0 || (incount > 0 && (!id_array || !index_array)))
        return -BMI_EINVAL;
    *outcount = 0;
    return with_instance([&](Instance& in) {
        std::vector<bmi::core::Completion> done(static_cast<std::size_t>(incount));
        int rc = in.testsome({id_array, static_cast<std::size_t>(incount)}, context_id,
                             max_idle_time_ms, *outcount,
                             {index_array, static_cast<std::size_t>(incount)}, done);
        for (int i = 0; i < *outcount; ++i)
            copy_completion(done[static_cast<std::size_t>(i)],
                            error_code_array ? &error_code_array[i] : nullptr,
                            actual_size_array ? &actual_size_array[i] : nullptr,
                            user_ptr_array ? &user_ptr_array[i] : nullptr);
        return rc;
    });
}

int BMI_testunexpected(int incount, int* outcount, struct BMI_unexpected_info* info_array,
                       int max_idle_time_ms) {
    // OrangeFS's dialect has no classes: it sees every message, whatever class a standalone
    // sender gave it.
    return test_unexpected(incount, outcount, info_array, std::nullopt, max_idle_time_ms);
}

int BMI_testcontext(int incount, bmi_op_id_t* out_id_array, int* outcount,
                    bmi_error_code_t* error_code_array, bmi_size_t* actual_size_array,
                    void** user_ptr_array, int max_idle_time_ms, bmi_context_id context_id) {
    if (outcount == nullptr || incount < 0 || (incount > 0 && out_id_array == nullptr))
        return -BMI_EINVAL;
    *outcount = 0;
    return with_instance([&](Instance& in) {
        std::vector<bmi::core::Completion> done(static_cast<std::size_t>(incount));
        int rc = in.testcontext(context_id, max_idle_time_ms, *outcount, done);
        for (int i = 0; i < *outcount; ++i) {
            const auto& c = done[static_cast<std::size_t>(i)];
            out_id_array[i] = c.id;
            copy_completion(c, error_code_array ? &error_code_array[i] : nullptr,
                            actual_size_array ? &actual_size_array[i] : nullptr,
                            user_ptr_array ? &user_ptr_array[i] : nullptr);
        }
        return rc;
    });
}

void* BMI_memalloc(BMI_addr_t addr, bmi_size_t size, enum bmi_op_type) {
    Instance* instance = global_instance();
    return instance ? instance->memalloc(addr, size) : nullptr;
}

int BMI_memfree(BMI_addr_t addr, void* buffer, bmi_size_t, enum bmi_op_type) {
    return with_instance([&](Instance& in) { return in.memfree(addr, buffer); });
}

int BMI_unexpected_free(BMI_addr_t, void* buffer) {
    return with_instance([&](Instance& in) { return in.unexpected_free(buffer); });
}

int BMI_set_info(BMI_addr_t addr, int option, void* inout_parameter) {
    return with_instance([&](Instance& in) { return in.set_info(addr, option, inout_parameter); });
}

int BMI_get_info(BMI_addr_t addr, int option, void* inout_parameter) {
    if (option == BMI_CHECK_INIT) return global_instance() ? 0 : -BMI_ENODEV;
    return with_instance([&](Instance& in) { return in.get_info(addr, option, inout_parameter); });
}

int BMI_addr_lookup(BMI_addr_t* new_addr, const char* id_string, char*) {
    if (new_addr == nullptr || id_string == nullptr) return -BMI_EINVAL;
    return with_instance([&](Instance& in) { return in.addr_lookup(id_string, *new_addr); });
}

const char* BMI_addr_rev_lookup(BMI_addr_t addr) {
    Instance* instance = global_instance();
    return instance ? instance->rev_lookup(addr) : nullptr;
}

const char* BMI_addr_rev_lookup_unexpected(BMI_addr_t addr) {
    Instance* instance = global_instance();
    return instance ? instance->rev_lookup_unexpected(addr) : nullptr;
}

int BMI_query_addr_range(BMI_addr_t addr, const char* id_string, int netmask) {
    if (id_string == nullptr) return -BMI_EINVAL;
    return with_instance(
        [&](Instance& in) { return in.query_addr_range(addr, id_string, netmask); });
}

int BMI_post_send_list(bmi_op_id_t* id, BMI_addr_t dest, const void* const* buffer_list,
                       const bmi_size_t* size_list, int list_count, bmi_size_t total_size,
                       enum bmi_buffer_type, bmi_msg_tag_t tag, void* user_ptr,
                       bmi_context_id context_id, bmi_hint) {
    auto r = request_of(OpKind::send, dest, nullptr, total_size, tag, user_ptr, context_id);
    r.list = buffer_list;
    r.sizes = size_list;
    r.list_count = list_count < 1 ? -1 : list_count;
    if (r.list_count < 0) return -BMI_EINVAL;
    return post_one(id, r, nullptr);
}

int BMI_post_recv_list(bmi_op_id_t* id, BMI_addr_t src, void* const* buffer_list,
                       const bmi_size_t* size_list, int list_count, bmi_size_t total_expected_size,
                       bmi_size_t* total_actual_size, enum bmi_buffer_type, bmi_msg_tag_t tag,
                       void* user_ptr, bmi_context_id context_id, bmi_hint) {
    if (list_count < 1) return -BMI_EINVAL;
    auto r = request_of(OpKind::recv, src, nullptr, total_expected_size, tag, user_ptr, context_id);
    r.list = const_cast<const void* const*>(buffer_list);
    r.sizes = size_list;
    r.list_count = list_count;
    return post_one(id, r, total_actual_size);
}

int BMI_post_sendunexpected_list(bmi_op_id_t* id, BMI_addr_t dest, const void* const* buffer_list,
                                 const bmi_size_t* size_list, int list_count, bmi_size_t total_size,
                                 enum bmi_buffer_type, bmi_msg_tag_t tag, void* user_ptr,
                                 bmi_context_id context_id, bmi_hint) {
    return post_unexpected_list(id, dest, buffer_list, size_list, list_count, total_size, tag, 0,
                                user_ptr, context_id);
}

int BMI_cancel(bmi_op_id_t id, bmi_context_id context_id) {
    return with_instance([&](Instance& in) { return in.cancel(id, context_id); });
}

const char* bmi_status_string(int error_code) { return bmi::support::error_name(error_code); }

const char* bmi_status_meaning(int error_code) { return bmi::support::error_meaning(error_code); }

int bmi_errno_to_pvfs(int error) { return bmi::support::bmi_error_from_errno(error); }

}  // extern "C"
