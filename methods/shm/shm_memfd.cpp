// SPDX-License-Identifier: LGPL-2.1-or-later
// Creating and checking sealed memfds; the reason for the seals is in the header.
#include "methods/shm/shm_memfd.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "support/error/error_map.hpp"

namespace bmi::method::shm {

namespace {
constexpr unsigned required_seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
}  // namespace

int create_sealed_memfd(const char* name, std::size_t size) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return support::bmi_error_from_errno(errno);
    if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        fcntl(fd, F_ADD_SEALS, required_seals) != 0) {
        int rc = support::bmi_error_from_errno(errno);
        close(fd);
        return rc;
    }
    return fd;
}

bool sealed_memfd_of_size(int fd, std::size_t size) {
    struct stat st {};
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (static_cast<unsigned>(seals) & required_seals) == required_seals &&
           fstat(fd, &st) == 0 && st.st_size >= 0 && static_cast<std::size_t>(st.st_size) == size;
}

}  // namespace bmi::method::shm
