/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* BMI's error codes, one list for both dialects' bmi-types.h (OrangeFS's and the standalone
 * library's give them the same values). Functions return their negation: -BMI_EINVAL, ...
 * Include bmi-types.h, not this file. */
#ifndef BMI_ERROR_CODES_H
#define BMI_ERROR_CODES_H

#define BMI_SUCCESS             0
#define BMI_ERROR_BIT           (1 << 30)
#define BMI_NON_ERRNO_ERROR_BIT (1 << 29)
#define BMI_NON_ERROR_BIT       (BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR_BIT)
/* The standalone library lets a program define BMI_ERROR itself. */
#ifndef BMI_ERROR
#define BMI_ERROR               (1 << 7)
#endif
#define BMIE(num)               ((num) | BMI_ERROR_BIT)

/* Codes that stand for an errno value. */
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

/* Codes of BMI's own, with no errno behind them. */
#define BMI_ECANCEL          (BMIE(1) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)
#define BMI_EDEVINIT         (BMIE(2) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)
#define BMI_EDETAIL          (BMIE(3) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)
#define BMI_EHOSTNTFD        (BMIE(4) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)
#define BMI_EADDRNTFD        (BMIE(5) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)
#define BMI_ENORECVR         (BMIE(6) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)
#define BMI_ETRYAGAIN        (BMIE(7) | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR)

#endif /* BMI_ERROR_CODES_H */
