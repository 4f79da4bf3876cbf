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
    /* get_info(0, .., char **out): *out = malloc'd "tcp,shm," (the caller frees it); returns
     * the number of methods. */
    BMI_TRANSPORT_METHODS_STRING = 17,
    BMI_TCP_GET_PORT = 18,  /* get_info(0, .., int *port): the port a server listens on */
    /* libbmi's own options start at 0x1000, as in the OrangeFS dialect. */
    BMI_UNEXPECTED_QUOTA_USE = 0x1000, /* get_info, struct BMI_unexpected_quota_use* */
    BMI_ADDRESS_COUNT = 0x1001         /* get_info with addr 0, int*: addresses held */
};

enum BMI_io_type
{
    BMI_IO_READ = 1,
    BMI_IO_WRITE = 2
};

/* For BMI_OPTIMISTIC_BUFFER_REG, which libbmi accepts and ignores. */
struct bmi_optimistic_buffer_info
{
    const void *buffer;
    bmi_size_t len;
    enum BMI_io_type rw;
};

/* What BMI_get_info(0, BMI_UNEXPECTED_QUOTA_USE, ...) reports about the unexpected quota. */
struct BMI_unexpected_quota_use
{
    bmi_size_t used;
    bmi_size_t limit;
    int blocked_peers;
};

/* Error codes: the same values as the OrangeFS dialect's. Functions return their negation. */
#define BMI_SUCCESS             0
#define BMI_ERROR_BIT           (1 << 30)
#define BMI_NON_ERRNO_ERROR_BIT (1 << 29)
#define BMI_NON_ERROR_BIT       (BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR_BIT)
#ifndef BMI_ERROR
#define BMI_ERROR (1 << 7)
#endif
#define BMIE(num) ((num) | BMI_ERROR_BIT)

#define BMI_EPERM            (BMIE(1) | BMI_ERROR)
#define BMI_ENOENT           (BMIE(2) | BMI_ERROR)
#define BMI_EINTR            (BMIE(3) | BMI_ERROR)
#define BMI_EIO              (BMIE(4) | BMI_ERROR)
#define BMI_ENXIO            (BMIE(5) | BMI_ERROR)
#define BMI_EBADF            (BMIE(6) | BMI_ERROR)
#define BMI_EAGAIN           (BMIE(7) | BMI_ERROR)
#define BMI_ENOMEM           (BMIE(8) | BMI_ERROR)
#define BMI_EFAULT           (BMIE(9) | BMI_ERROR)
#define BMI_EBUSY            (BMIE(10) | BMI_ERROR)
#define BMI_EEXIST           (BMIE(11) | BMI_ERROR)
#define BMI_ENODEV           (BMIE(12) | BMI_ERROR)
#define BMI_ENOTDIR          (BMIE(13) | BMI_ERROR)
#define BMI_EISDIR           (BMIE(14) | BMI_ERROR)
#define BMI_EINVAL           (BMIE(15) | BMI_ERROR)
#define BMI_EMFILE           (BMIE(16) | BMI_ERROR)
#define BMI_EFBIG            (BMIE(17) | BMI_ERROR)
#define BMI_ENOSPC           (BMIE(18) | BMI_ERROR)
#define BMI_EROFS            (BMIE(19) | BMI_ERROR)
#define BMI_EMLINK           (BMIE(20) | BMI_ERROR)
#define BMI_EPIPE            (BMIE(21) | BMI_ERROR)
#define BMI_EDEADLK          (BMIE(22) | BMI_ERROR)
#define BMI_ENAMETOOLONG     (BMIE(23) | BMI_ERROR)
#define BMI_ENOLCK           (BMIE(24) | BMI_ERROR)
#define BMI_ENOSYS           (BMIE(25) | BMI_ERROR)
#define BMI_ENOTEMPTY        (BMIE(26) | BMI_ERROR)
#define BMI_ELOOP            (BMIE(27) | BMI_ERROR)
#define BMI_EWOULDBLOCK      (BMIE(28) | BMI_ERROR)
#define BMI_ENOMSG           (BMIE(29) | BMI_ERROR)
#define BMI_EUNATCH          (BMIE(30) | BMI_ERROR)
#define BMI_EBADR            (BMIE(31) | BMI_ERROR)
#define BMI_EDEADLOCK        (BMIE(32) | BMI_ERROR)
#define BMI_ENODATA          (BMIE(33) | BMI_ERROR)
#define BMI_ETIME            (BMIE(34) | BMI_ERROR)
#define BMI_ENONET           (BMIE(35) | BMI_ERROR)
#define BMI_EREMOTE          (BMIE(36) | BMI_ERROR)
#define BMI_ECOMM            (BMIE(37) | BMI_ERROR)
#define BMI_EPROTO           (BMIE(38) | BMI_ERROR)
#define BMI_EBADMSG          (BMIE(39) | BMI_ERROR)
#define BMI_EOVERFLOW        (BMIE(40) | BMI_ERROR)
#define BMI_ERESTART         (BMIE(41) | BMI_ERROR)
#define BMI_EMSGSIZE         (BMIE(42) | BMI_ERROR)
#define BMI_EPROTOTYPE       (BMIE(43) | BMI_ERROR)
#define BMI_ENOPROTOOPT      (BMIE(44) | BMI_ERROR)
#define BMI_EPROTONOSUPPORT  (BMIE(45) | BMI_ERROR)
#define BMI_EOPNOTSUPP       (BMIE(46) | BMI_ERROR)
#define BMI_EADDRINUSE       (BMIE(47) | BMI_ERROR)
#define BMI_EADDRNOTAVAIL    (BMIE(48) | BMI_ERROR)
#define BMI_ENETDOWN         (BMIE(49) | BMI_ERROR)
#define BMI_ENETUNREACH      (BMIE(50) | BMI_ERROR)
#define BMI_ENETRESET        (BMIE(51) | BMI_ERROR)
#define BMI_ENOBUFS          (BMIE(52) | BMI_ERROR)
#define BMI_ETIMEDOUT        (BMIE(53) | BMI_ERROR)
#define BMI_ECONNREFUSED     (BMIE(54) | BMI_ERROR)
#define BMI_EHOSTDOWN        (BMIE(55) | BMI_ERROR)
#define BMI_EHOSTUNREACH     (BMIE(56) | BMI_ERROR)
#define BMI_EALREADY         (BMIE(57) | BMI_ERROR)
#define BMI_EACCES           (BMIE(58) | BMI_ERROR)
#define BMI_ECONNRESET       (BMIE(59) | BMI_ERROR)
#define BMI_ECANCEL          ((1 | BMI_NON_ERROR_BIT) | BMI_ERROR)
#define BMI_EDEVINIT         ((2 | BMI_NON_ERROR_BIT) | BMI_ERROR)
#define BMI_EDETAIL          ((3 | BMI_NON_ERROR_BIT) | BMI_ERROR)
#define BMI_EHOSTNTFD        ((4 | BMI_NON_ERROR_BIT) | BMI_ERROR)
#define BMI_EADDRNTFD        ((5 | BMI_NON_ERROR_BIT) | BMI_ERROR)
#define BMI_ENORECVR         ((6 | BMI_NON_ERROR_BIT) | BMI_ERROR)
#define BMI_ETRYAGAIN        ((7 | BMI_NON_ERROR_BIT) | BMI_ERROR)

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
