// SPDX-License-Identifier: LGPL-2.1-or-later
// The one table between BMI error codes, errno values and their names.
#include "error_map.hpp"

#include <cerrno>
#include <climits>
#include <cstring>

#include "bmi-types.h"

namespace bmi::support {

namespace {
// Order matters only where errno values alias on Linux (EWOULDBLOCK == EAGAIN,
// EDEADLOCK == EDEADLK): the first row wins when mapping from errno.
constexpr ErrorEntry table[] = {
    {BMI_EPERM, EPERM, "BMI_EPERM"},
    {BMI_ENOENT, ENOENT, "BMI_ENOENT"},
    {BMI_EINTR, EINTR, "BMI_EINTR"},
    {BMI_EIO, EIO, "BMI_EIO"},
    {BMI_ENXIO, ENXIO, "BMI_ENXIO"},
    {BMI_EBADF, EBADF, "BMI_EBADF"},
    {BMI_EAGAIN, EAGAIN, "BMI_EAGAIN"},
    {BMI_ENOMEM, ENOMEM, "BMI_ENOMEM"},
    {BMI_EFAULT, EFAULT, "BMI_EFAULT"},
    {BMI_EBUSY, EBUSY, "BMI_EBUSY"},
    {BMI_EEXIST, EEXIST, "BMI_EEXIST"},
    {BMI_ENODEV, ENODEV, "BMI_ENODEV"},
    {BMI_ENOTDIR, ENOTDIR, "BMI_ENOTDIR"},
    {BMI_EISDIR, EISDIR, "BMI_EISDIR"},
    {BMI_EINVAL, EINVAL, "BMI_EINVAL"},
    {BMI_EMFILE, EMFILE, "BMI_EMFILE"},
    {BMI_EFBIG, EFBIG, "BMI_EFBIG"},
    {BMI_ENOSPC, ENOSPC, "BMI_ENOSPC"},
    {BMI_EROFS, EROFS, "BMI_EROFS"},
    {BMI_EMLINK, EMLINK, "BMI_EMLINK"},
    {BMI_EPIPE, EPIPE, "BMI_EPIPE"},
    {BMI_EDEADLK, EDEADLK, "BMI_EDEADLK"},
    {BMI_ENAMETOOLONG, ENAMETOOLONG, "BMI_ENAMETOOLONG"},
    {BMI_ENOLCK, ENOLCK, "BMI_ENOLCK"},
    {BMI_ENOSYS, ENOSYS, "BMI_ENOSYS"},
    {BMI_ENOTEMPTY, ENOTEMPTY, "BMI_ENOTEMPTY"},
    {BMI_ELOOP, ELOOP, "BMI_ELOOP"},
    {BMI_EWOULDBLOCK, EWOULDBLOCK, "BMI_EWOULDBLOCK"},
    {BMI_ENOMSG, ENOMSG, "BMI_ENOMSG"},
    {BMI_EUNATCH, EUNATCH, "BMI_EUNATCH"},
    {BMI_EBADR, EBADR, "BMI_EBADR"},
    {BMI_EDEADLOCK, EDEADLOCK, "BMI_EDEADLOCK"},
    {BMI_ENODATA, ENODATA, "BMI_ENODATA"},
    {BMI_ETIME, ETIME, "BMI_ETIME"},
    {BMI_ENONET, ENONET, "BMI_ENONET"},
    {BMI_EREMOTE, EREMOTE, "BMI_EREMOTE"},
    {BMI_ECOMM, ECOMM, "BMI_ECOMM"},
    {BMI_EPROTO, EPROTO, "BMI_EPROTO"},
    {BMI_EBADMSG, EBADMSG, "BMI_EBADMSG"},
    {BMI_EOVERFLOW, EOVERFLOW, "BMI_EOVERFLOW"},
    {BMI_ERESTART, ERESTART, "BMI_ERESTART"},
    {BMI_EMSGSIZE, EMSGSIZE, "BMI_EMSGSIZE"},
    {BMI_EPROTOTYPE, EPROTOTYPE, "BMI_EPROTOTYPE"},
    {BMI_ENOPROTOOPT, ENOPROTOOPT, "BMI_ENOPROTOOPT"},
    {BMI_EPROTONOSUPPORT, EPROTONOSUPPORT, "BMI_EPROTONOSUPPORT"},
    {BMI_EOPNOTSUPP, EOPNOTSUPP, "BMI_EOPNOTSUPP"},
    {BMI_EADDRINUSE, EADDRINUSE, "BMI_EADDRINUSE"},
    {BMI_EADDRNOTAVAIL, EADDRNOTAVAIL, "BMI_EADDRNOTAVAIL"},
    {BMI_ENETDOWN, ENETDOWN, "BMI_ENETDOWN"},
    {BMI_ENETUNREACH, ENETUNREACH, "BMI_ENETUNREACH"},
    {BMI_ENETRESET, ENETRESET, "BMI_ENETRESET"},
    {BMI_ENOBUFS, ENOBUFS, "BMI_ENOBUFS"},
    {BMI_ETIMEDOUT, ETIMEDOUT, "BMI_ETIMEDOUT"},
    {BMI_ECONNREFUSED, ECONNREFUSED, "BMI_ECONNREFUSED"},
    {BMI_EHOSTDOWN, EHOSTDOWN, "BMI_EHOSTDOWN"},
    {BMI_EHOSTUNREACH, EHOSTUNREACH, "BMI_EHOSTUNREACH"},
    {BMI_EALREADY, EALREADY, "BMI_EALREADY"},
    {BMI_EACCES, EACCES, "BMI_EACCES"},
    {BMI_ECONNRESET, ECONNRESET, "BMI_ECONNRESET"},
    {BMI_ECANCEL, 0, "BMI_ECANCEL"},
    {BMI_EDEVINIT, 0, "BMI_EDEVINIT"},
    {BMI_EDETAIL, 0, "BMI_EDETAIL"},
    {BMI_EHOSTNTFD, 0, "BMI_EHOSTNTFD"},
    {BMI_EADDRNTFD, 0, "BMI_EADDRNTFD"},
    {BMI_ENORECVR, 0, "BMI_ENORECVR"},
    {BMI_ETRYAGAIN, 0, "BMI_ETRYAGAIN"},
};
}  // namespace

std::span<const ErrorEntry> error_table() { return table; }

const ErrorEntry* find_error(int code) {
    if (code == INT_MIN) return nullptr;
    if (code < 0) code = -code;
    for (const auto& entry : table)
        if (entry.code == code) return &entry;
    return nullptr;
}

int bmi_error_from_errno(int error) {
    if (error == INT_MIN) return -BMI_EDETAIL;
    if (error < 0) error = -error;
    if (error == 0) return 0;
    for (const auto& entry : table)
        if (entry.errno_value == error) return -entry.code;
    return -BMI_EDETAIL;
}

int errno_from_bmi_error(int code) {
    if (code == 0) return 0;
    const ErrorEntry* entry = find_error(code);
    return entry && entry->errno_value != 0 ? entry->errno_value : EIO;
}

const char* error_meaning(int code) {
    if (code == 0) return "success";
    const ErrorEntry* entry = find_error(code);
    if (entry == nullptr) return "unknown BMI error";
    // strerrordesc_np, unlike strerror, returns a constant string and is thread-safe.
    if (entry->errno_value != 0) {
        const char* text = strerrordesc_np(entry->errno_value);
        return text ? text : entry->name;
    }
    switch (entry->code) {
        case BMI_ECANCEL:
            return "the operation was cancelled";
        case BMI_EDEVINIT:
            return "a method could not initialize its device";
        case BMI_EDETAIL:
            return "a failure without a more specific code";
        case BMI_EHOSTNTFD:
            return "the host name did not resolve";
        case BMI_EADDRNTFD:
            return "no such address";
        case BMI_ENORECVR:
            return "no receiver for the message";
        case BMI_ETRYAGAIN:
            return "not now; try again";
        default:
            return entry->name;
    }
}

const char* error_name(int code) {
    if (code == 0) return "BMI_SUCCESS";
    const ErrorEntry* entry = find_error(code);
    return entry ? entry->name : "unknown BMI error";
}

}  // namespace bmi::support
