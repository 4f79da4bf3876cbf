/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Types, constants and error codes of the BMI C API, spelled as OrangeFS spells them. */
#ifndef BMI_TYPES_H
#define BMI_TYPES_H

#ifdef BMI_STANDALONE_TYPES_H
#error "OrangeFS-dialect bmi-types.h and bmi-standalone/bmi-types.h cannot both be included"
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

#define BMI_MAX_ADDR_LEN 2048

/* BMI_initialize flags. */
#define BMI_INIT_SERVER       1
#define BMI_TCP_BIND_SPECIFIC 2
#define BMI_AUTO_REF_COUNT    4

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

/* Options for BMI_set_info and BMI_get_info. */
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
    /* OrangeFS passes its server configuration, whose layout libbmi cannot know: refused with
     * -BMI_ENOSYS (keys do this job, doc/security.md). OrangeFS declares it under USE_TRUSTED. */
    BMI_TRUSTED_CONNECTION = 9,
    BMI_GET_UNEXP_SIZE = 10,
    BMI_TCP_BUFFER_SEND_SIZE = 11,
    BMI_TCP_BUFFER_RECEIVE_SIZE = 12,
    BMI_TCP_CLOSE_SOCKET = 13,
    BMI_OPTIMISTIC_BUFFER_REG = 14,
    BMI_TCP_CHECK_UNEXPECTED = 15,
    BMI_TRANSPORT_METHODS_STRING = 16,
    /* libbmi's own options start at 0x1000, far from OrangeFS's numbers. */
    BMI_UNEXPECTED_QUOTA_USE = 0x1000, /* get_info, struct BMI_unexpected_quota_use* */
    BMI_ADDRESS_COUNT = 0x1001         /* get_info with addr 0, int*: addresses held */
};

#include "bmi-io-hint.h"

/* What BMI_get_info(0, BMI_UNEXPECTED_QUOTA_USE, ...) reports about the unexpected quota. */
struct BMI_unexpected_quota_use
{
    bmi_size_t used;   /* bytes of unexpected messages not yet returned by BMI_unexpected_free */
    bmi_size_t limit;  /* the quota (BMI_UNEXPECTED_QUOTA or the unexpected_quota= option) */
    int blocked_peers; /* peers whose next unexpected message waits in the network for quota */
};

/* What BMI_testunexpected hands out; buffer belongs to the caller until BMI_unexpected_free. */
struct BMI_unexpected_info
{
    bmi_error_code_t error_code;
    BMI_addr_t addr;
    void *buffer;
    bmi_size_t size;
    bmi_msg_tag_t tag;
};

#include "bmi-error-codes.h"

/* The name of a BMI error code of either sign ("BMI_EINVAL"), or "unknown BMI error". */
const char *bmi_status_string(int error_code);
/* libbmi's addition: what a BMI error code of either sign means ("Connection refused"). */
const char *bmi_status_meaning(int error_code);
/* Maps a positive or negative errno value to the negative BMI code. */
int bmi_errno_to_pvfs(int error);

#ifdef __cplusplus
}
#endif

#endif /* BMI_TYPES_H */
