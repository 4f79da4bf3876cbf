/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What examples/pvfs_server.c and pvfs_client.c share: their toy request/response protocol
 * and two small helpers. Include after defining _POSIX_C_SOURCE (for clock_gettime). */
#ifndef PVFS_PROTO_H
#define PVFS_PROTO_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Structs travel in host byte order: both ends of the example run on one kind of machine. A real
 * PVFS protocol encodes them explicitly. */
#define PVFS_PROTO_MAGIC 0x50564653u /* "PVFS" */

/* Anything past the header is generated, so the server never holds a response larger than this. */
#define PVFS_MAX_RESPONSE (16u * 1024u * 1024u)

enum pvfs_op
{
    PVFS_OP_GETATTR = 1,  /* answered with response_size bytes */
    PVFS_OP_SHUTDOWN = 2, /* answered like GETATTR, then the server drains and exits */
    PVFS_OP_BYE = 3       /* answered like GETATTR; says the client is done (the server needs
                           * no goodbye to free its address: doc/guide-server.md) */
};

/* Sent as an unexpected message. The answer is an expected message with the same tag. */
struct pvfs_request
{
    uint32_t magic;
    uint32_t op;
    uint64_t request_id;
    uint64_t response_size; /* total bytes wanted, response header included */
};

/* Starts every response. A refused request gets this header alone (a short message). */
struct pvfs_response
{
    uint32_t magic;
    int32_t status; /* 0, or a positive errno value saying why the request was refused */
    uint64_t request_id;
    uint64_t size; /* total bytes of this response */
};

/* The method an address needs, "bmi_" and its scheme ("shm://x" -> "bmi_shm", "ofi+tcp://x" ->
 * "bmi_ofi": tcp is ofi's provider), into out; falls back to bmi_tcp for a string without
 * "://", which BMI_addr_lookup then rejects clearly. */
static inline const char *pvfs_method_for(const char *addr, char *out, size_t size)
{
    const char *end = addr != NULL ? strstr(addr, "://") : NULL;
    if (end == NULL)
        return "bmi_tcp";
    const char *plus = (const char *)memchr(addr, '+', (size_t)(end - addr));
    if (plus != NULL)
        end = plus;
    if ((size_t)(end - addr) + 5 > size)
        return "bmi_tcp";
    memcpy(out, "bmi_", 4);
    memcpy(out + 4, addr, (size_t)(end - addr));
    out[4 + (end - addr)] = '\0';
    return out;
}

/* The byte at offset i of the payload answering request_id. Mixing in the id makes a response
 * delivered to the wrong request fail verification. */
static inline unsigned char pvfs_pattern_byte(uint64_t request_id, size_t i)
{
    return (unsigned char)((request_id * 131u + i * 7u + (i >> 9)) & 0xffu);
}

static inline void pvfs_pattern_fill(unsigned char *payload, size_t len, uint64_t request_id)
{
    size_t i;
    for (i = 0; i < len; i++)
        payload[i] = pvfs_pattern_byte(request_id, i);
}

/* Returns the offset of the first wrong byte, or len if the whole payload is right. */
static inline size_t pvfs_pattern_check(const unsigned char *payload, size_t len,
                                        uint64_t request_id)
{
    size_t i;
    for (i = 0; i < len; i++)
        if (payload[i] != pvfs_pattern_byte(request_id, i))
            return i;
    return len;
}

static inline double pvfs_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Parses a non-negative decimal count; returns 0, or -1 for anything else. */
static inline int pvfs_parse_count(const char *text, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-')
        return -1;
    *out = v;
    return 0;
}

#endif /* PVFS_PROTO_H */
