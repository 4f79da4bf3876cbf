/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Types, constants and error codes of the standalone BMI library's C API (the radix-io/bmi
 * dialect that Mercury's NA bmi plugin is written against), as that library spells them.
 * Build with -I<includedir>/bmi-standalone (pkg-config bmi-standalone) and link -lbmi: the
 * same libbmi serves this dialect and OrangeFS's (doc/dialects.md).
 *
 * Where the two dialects differ: option numbers from 9 on (BMI_TRANSPORT_METHODS_STRING is 17
 * here, 16 in OrangeFS's), BMI_TCP_GET_PORT, BMI_MAX_ADDR_LEN 256, and the message classes and
 * shorter signatures declared in bmi.h. Types and error codes are the same. */
#ifndef BMI_STANDALONE_TYPES_H
#define BMI_STANDALONE_TYPES_H

#ifdef BMI_TYPES_H
#error "bmi-standalone/bmi-types.h and OrangeFS-dialect bmi-types.h cannot both be included"
#endif

#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t bmi_size_t;
typedef int32_t bmi_msg_tag_t;
typedef int64_t bmi_context_id;
typedef int64_t bmi_op_id_t;
typedef int64_t BMI_addr_t;
typedef int32_t bmi_error_code_t;

/* Hints are accepted for source compatibility and ignored. */
struct PVFS_hint_s;
typedef struct PVFS_hint_s *bmi_hint;

#define BMI_MAX_ADDR_LEN 256

/* BMI_initialize flags. */
enum
{
    BMI_INIT_SERVER = 1,
    BMI_TCP_BIND_SPECIFIC = 2,
    BMI_AUTO_REF_COUNT = 4
};

enum bmi_op_type
{
    BMI_SEND = 1,
    BMI_RECV = 2
};

enum bmi_buffer_type
{
    BMI_PRE_ALLOC = 1,
    BMI_EXT_ALLOC = 2
};

/* BMI_get_info(0, BMI_TRANSPORT_METHODS_STRING, ..) names the methods of this build: Mercury's
 * na_bmi then accepts each of them (bmi+shm, bmi+verbs, ...), not only tcp and ib. */
#define BMI_SUPPORTS_TRANSPORT_METHOD_GETINFO 1

/* Options for BMI_set_info and BMI_get_info, numbered as the standalone library numbers them. */
enum
{
    BMI_DROP_ADDR = 1,
    BMI_CHECK_INIT = 2,
    BMI_CHECK_MAXSIZE = 3,
    BMI_GET_METH_ADDR = 4,
    BMI_INC_ADDR_REF = 5,
    BMI_DEC_ADDR_REF = 6,
    BMI_DROP_ADDR_QUERY = 7,
    BMI_FORCEFUL_CANCEL_MODE = 8,
    BMI_TRUSTED_CONNECTION = 9,  /* refused with -BMI_ENOSYS: keys do this (doc/security.md) */
    BMI_GET_UNEXP_SIZE = 10,
    BMI_TCP_BUFFER_SEND_SIZE = 11,
    BMI_TCP_BUFFER_RECEIVE_SIZE = 12,
    BMI_TCP_CLOSE_SOCKET = 13,
    BMI_OPTIMISTIC_BUFFER_REG = 14,
    BMI_TCP_CHECK_UNEXPECTED = 15,
    BMI_ZOID_POST_TIMEOUT = 16,  /* no zoid method: -BMI_ENOSYS */
    /* get_info(0, .., char **out): *out = malloc'd list of the compiled methods, such as
     * "tcp,shm,verbs,ib,ofi," (the caller frees it); returns the number of names. */
    BMI_TRANSPORT_METHODS_STRING = 17,
    /* get_info(0, .., int *port): the port a server listens on (tcp's, or the PORT of a
     * listening "shm://NAME:PORT" or "verbs://HOST:PORT") */
    BMI_TCP_GET_PORT = 18,
    /* libbmi's own options start at 0x1000, as in the OrangeFS dialect. */
    BMI_UNEXPECTED_QUOTA_USE = 0x1000, /* get_info, struct BMI_unexpected_quota_use* */
    BMI_ADDRESS_COUNT = 0x1001         /* get_info with addr 0, int*: addresses held */
};

#include "../bmi-io-hint.h"

/* What BMI_get_info(0, BMI_UNEXPECTED_QUOTA_USE, ...) reports about the unexpected quota. */
struct BMI_unexpected_quota_use
{
    bmi_size_t used;
    bmi_size_t limit;
    int blocked_peers;
};

/* Error codes: one list with the OrangeFS dialect (the same values). */
#include "../bmi-error-codes.h"

/* Maps a positive or negative errno value to the negative BMI code. */
int bmi_errno_to_pvfs(int error);
/* libbmi's addition: the name of a BMI error code of either sign ("BMI_EINVAL"). */
const char *bmi_status_string(int error_code);
/* libbmi's addition: what a BMI error code of either sign means ("Connection refused"). */
const char *bmi_status_meaning(int error_code);

#ifdef __cplusplus
}
#endif

#endif /* BMI_STANDALONE_TYPES_H */
