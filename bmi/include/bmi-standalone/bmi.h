/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The BMI C API of the standalone BMI library (radix-io/bmi), with its names and signatures,
 * so a program written against that library (Mercury's NA bmi plugin) builds unchanged with
 * -I<includedir>/bmi-standalone and links the same libbmi as OrangeFS-dialect programs.
 *
 * One library, two ABIs: the four functions whose signature or option numbers differ from the
 * OrangeFS dialect are renamed to BMI_standalone_* here, so the two never collide in libbmi;
 * a program calls them by their usual names. The unsuffixed unexpected-message calls are
 * macros for message class 0, as in the standalone library.
 *
 * Return convention of every post call: 0 = posted (test for it later), 1 = completed
 * immediately (outputs are final, do not test), negative = -BMI_E* (nothing was posted). */
#ifndef BMI_STANDALONE_H
#define BMI_STANDALONE_H

#ifdef BMI_H
#error "bmi-standalone/bmi.h and OrangeFS-dialect bmi.h cannot both be included"
#endif

#include <stdint.h>

#include "bmi-types.h"

#define BMI_initialize  BMI_standalone_initialize
#define BMI_addr_lookup BMI_standalone_addr_lookup
#define BMI_get_info    BMI_standalone_get_info
#define BMI_set_info    BMI_standalone_set_info

#ifdef __cplusplus
extern "C" {
#endif

/* What BMI_testunexpected_class hands out; buffer is the caller's until BMI_unexpected_free. */
struct BMI_unexpected_info
{
    bmi_error_code_t error_code;
    BMI_addr_t addr;
    void *buffer;
    bmi_size_t size;
    bmi_msg_tag_t tag;
};

/* listen_addr may be "tcp://host" without a port: the kernel picks one, and
 * BMI_get_info(0, BMI_TCP_GET_PORT, &port) tells which. */
int BMI_initialize(const char *method_list, const char *listen_addr, int flags);
int BMI_finalize(void);
int BMI_open_context(bmi_context_id *context_id);
void BMI_close_context(bmi_context_id context_id);

int BMI_post_send(bmi_op_id_t *id, BMI_addr_t dest, const void *buffer, bmi_size_t size,
                  enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag, void *user_ptr,
                  bmi_context_id context_id, bmi_hint hints);
int BMI_post_sendunexpected_class(bmi_op_id_t *id, BMI_addr_t dest, const void *buffer,
                                  bmi_size_t size, enum bmi_buffer_type buffer_type,
                                  bmi_msg_tag_t tag, uint8_t msg_class, void *user_ptr,
                                  bmi_context_id context_id, bmi_hint hints);
#define BMI_post_sendunexpected(id, dest, buffer, size, buffer_type, tag, user_ptr, context_id, \
                                hints)                                                          \
    BMI_post_sendunexpected_class(id, dest, buffer, size, buffer_type, tag, 0, user_ptr,        \
                                  context_id, hints)
int BMI_post_recv(bmi_op_id_t *id, BMI_addr_t src, void *buffer, bmi_size_t expected_size,
                  bmi_size_t *actual_size, enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag,
                  void *user_ptr, bmi_context_id context_id, bmi_hint hints);

int BMI_test(bmi_op_id_t id, int *outcount, bmi_error_code_t *error_code,
             bmi_size_t *actual_size, void **user_ptr, int max_idle_time_ms,
             bmi_context_id context_id);
int BMI_testsome(int incount, bmi_op_id_t *id_array, int *outcount, int *index_array,
                 bmi_error_code_t *error_code_array, bmi_size_t *actual_size_array,
                 void **user_ptr_array, int max_idle_time_ms, bmi_context_id context_id);
/* Only messages of msg_class; others stay queued for their own class. */
int BMI_testunexpected_class(int incount, int *outcount, struct BMI_unexpected_info *info_array,
                             uint8_t msg_class, int max_idle_time_ms);
#define BMI_testunexpected(incount, outcount, info_array, max_idle_time_ms) \
    BMI_testunexpected_class(incount, outcount, info_array, 0, max_idle_time_ms)
int BMI_testcontext(int incount, bmi_op_id_t *out_id_array, int *outcount,
                    bmi_error_code_t *error_code_array, bmi_size_t *actual_size_array,
                    void **user_ptr_array, int max_idle_time_ms, bmi_context_id context_id);

void *BMI_memalloc(BMI_addr_t addr, bmi_size_t size, enum bmi_op_type send_recv);
int BMI_memfree(BMI_addr_t addr, void *buffer, bmi_size_t size, enum bmi_op_type send_recv);
int BMI_unexpected_free(BMI_addr_t addr, void *buffer);

int BMI_set_info(BMI_addr_t addr, int option, void *inout_parameter);
int BMI_get_info(BMI_addr_t addr, int option, void *inout_parameter);

int BMI_addr_lookup(BMI_addr_t *new_addr, const char *id_string);
const char *BMI_addr_rev_lookup(BMI_addr_t addr);
const char *BMI_addr_rev_lookup_unexpected(BMI_addr_t addr);
int BMI_query_addr_range(BMI_addr_t addr, const char *id_string, int netmask);

/* List I/O: the arrays are not copied and must stay valid until the operation completes. */
int BMI_post_send_list(bmi_op_id_t *id, BMI_addr_t dest, const void *const *buffer_list,
                       const bmi_size_t *size_list, int list_count, bmi_size_t total_size,
                       enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag, void *user_ptr,
                       bmi_context_id context_id, bmi_hint hints);
int BMI_post_recv_list(bmi_op_id_t *id, BMI_addr_t src, void *const *buffer_list,
                       const bmi_size_t *size_list, int list_count,
                       bmi_size_t total_expected_size, bmi_size_t *total_actual_size,
                       enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag, void *user_ptr,
                       bmi_context_id context_id, bmi_hint hints);
int BMI_post_sendunexpected_list_class(bmi_op_id_t *id, BMI_addr_t dest,
                                       const void *const *buffer_list,
                                       const bmi_size_t *size_list, int list_count,
                                       bmi_size_t total_size, enum bmi_buffer_type buffer_type,
                                       bmi_msg_tag_t tag, uint8_t msg_class, void *user_ptr,
                                       bmi_context_id context_id, bmi_hint hints);
#define BMI_post_sendunexpected_list(id, dest, buffer_list, size_list, list_count, total_size, \
                                     buffer_type, tag, user_ptr, context_id, hints)            \
    BMI_post_sendunexpected_list_class(id, dest, buffer_list, size_list, list_count,           \
                                       total_size, buffer_type, tag, 0, user_ptr, context_id,  \
                                       hints)

int BMI_cancel(bmi_op_id_t id, bmi_context_id context_id);

#ifdef __cplusplus
}
#endif

#endif /* BMI_STANDALONE_H */
