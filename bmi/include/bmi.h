/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The BMI C API with OrangeFS's names and signatures, so PVFS-style code builds unchanged.
 *
 * Return convention of every post call: 0 = posted (test for it later), 1 = completed
 * immediately (outputs are final, do not test), negative = -BMI_E* (nothing was posted).
 * An operation's own failure arrives in its error_code at completion, also as -BMI_E*. */
#ifndef BMI_H
#define BMI_H

#include "bmi-types.h"

#ifdef __cplusplus
extern "C" {
#endif

int BMI_initialize(const char *method_list, const char *listen_addr, int flags, char *options);
int BMI_finalize(void);
int BMI_open_context(bmi_context_id *context_id);
void BMI_close_context(bmi_context_id context_id);

int BMI_post_send(bmi_op_id_t *id, BMI_addr_t dest, const void *buffer, bmi_size_t size,
                  enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag, void *user_ptr,
                  bmi_context_id context_id, bmi_hint hints);
int BMI_post_sendunexpected(bmi_op_id_t *id, BMI_addr_t dest, const void *buffer,
                            bmi_size_t size, enum bmi_buffer_type buffer_type,
                            bmi_msg_tag_t tag, void *user_ptr, bmi_context_id context_id,
                            bmi_hint hints);
int BMI_post_recv(bmi_op_id_t *id, BMI_addr_t src, void *buffer, bmi_size_t expected_size,
                  bmi_size_t *actual_size, enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag,
                  void *user_ptr, bmi_context_id context_id, bmi_hint hints);

int BMI_test(bmi_op_id_t id, int *outcount, bmi_error_code_t *error_code,
             bmi_size_t *actual_size, void **user_ptr, int max_idle_time_ms,
             bmi_context_id context_id);
int BMI_testsome(int incount, bmi_op_id_t *id_array, int *outcount, int *index_array,
                 bmi_error_code_t *error_code_array, bmi_size_t *actual_size_array,
                 void **user_ptr_array, int max_idle_time_ms, bmi_context_id context_id);
int BMI_testunexpected(int incount, int *outcount, struct BMI_unexpected_info *info_array,
                       int max_idle_time_ms);
int BMI_testcontext(int incount, bmi_op_id_t *out_id_array, int *outcount,
                    bmi_error_code_t *error_code_array, bmi_size_t *actual_size_array,
                    void **user_ptr_array, int max_idle_time_ms, bmi_context_id context_id);

void *BMI_memalloc(BMI_addr_t addr, bmi_size_t size, enum bmi_op_type send_recv);
int BMI_memfree(BMI_addr_t addr, void *buffer, bmi_size_t size, enum bmi_op_type send_recv);
int BMI_unexpected_free(BMI_addr_t addr, void *buffer);

int BMI_set_info(BMI_addr_t addr, int option, void *inout_parameter);
int BMI_get_info(BMI_addr_t addr, int option, void *inout_parameter);

int BMI_addr_lookup(BMI_addr_t *new_addr, const char *id_string, char *bmi_opts);
const char *BMI_addr_rev_lookup(BMI_addr_t addr);
const char *BMI_addr_rev_lookup_unexpected(BMI_addr_t addr);
int BMI_query_addr_range(BMI_addr_t addr, const char *id_string, int netmask);

/* List I/O: the arrays are not copied and must stay valid until the operation completes.
 * Sender and receiver lists need not match; only the totals are compared. */
int BMI_post_send_list(bmi_op_id_t *id, BMI_addr_t dest, const void *const *buffer_list,
                       const bmi_size_t *size_list, int list_count, bmi_size_t total_size,
                       enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag, void *user_ptr,
                       bmi_context_id context_id, bmi_hint hints);
int BMI_post_recv_list(bmi_op_id_t *id, BMI_addr_t src, void *const *buffer_list,
                       const bmi_size_t *size_list, int list_count,
                       bmi_size_t total_expected_size, bmi_size_t *total_actual_size,
                       enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag, void *user_ptr,
                       bmi_context_id context_id, bmi_hint hints);
int BMI_post_sendunexpected_list(bmi_op_id_t *id, BMI_addr_t dest,
                                 const void *const *buffer_list, const bmi_size_t *size_list,
                                 int list_count, bmi_size_t total_size,
                                 enum bmi_buffer_type buffer_type, bmi_msg_tag_t tag,
                                 void *user_ptr, bmi_context_id context_id, bmi_hint hints);

int BMI_cancel(bmi_op_id_t id, bmi_context_id context_id);

#ifdef __cplusplus
}
#endif

#endif /* BMI_H */
