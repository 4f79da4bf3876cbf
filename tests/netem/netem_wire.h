/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The checked messages netem_client.c and netem_server.c exchange over a faulty network. Every
 * message starts with a netem_head and carries a checksum over all of its other bytes, so a
 * message lost, corrupted, duplicated, truncated or delivered to the wrong request is seen.
 * Include after defining _POSIX_C_SOURCE (for clock_gettime). */
#ifndef NETEM_WIRE_H
#define NETEM_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define NETEM_MAGIC 0x4e45544du /* "NETM" */
#define NETEM_TAG_REQUEST 7     /* the unexpected request; BULK and REPLY use netem_tag(seq) */
#define NETEM_REQUEST_MAX 2048  /* header plus padding: well under the unexpected limit */

enum netem_kind
{
    NETEM_REQUEST = 1, /* unexpected: asks for a REPLY of reply_size, announces a BULK */
    NETEM_BULK = 2,    /* expected, client to server, bulk_size bytes */
    NETEM_REPLY = 3    /* expected, server to client, reply_size bytes */
};

/* Host byte order: both ends run on one machine. */
struct netem_head
{
    uint32_t magic;
    uint32_t kind;
    uint64_t client;     /* the client's id */
    uint64_t seq;        /* the client's request number, strictly increasing */
    uint64_t size;       /* bytes of this message, header included */
    uint64_t bulk_size;  /* REQUEST: bytes of the BULK that follows (0: none) */
    uint64_t reply_size; /* REQUEST: bytes the REPLY must have */
    uint64_t count;      /* REPLY: requests the server took from this client, this one included */
    uint64_t sum;        /* netem_sum of the message with this field 0 */
};

/* BULK and REPLY of request seq: a tag of their own, so nothing of another request matches. */
static inline int32_t netem_tag(uint64_t seq)
{
    return (int32_t)(1000u + (seq % 1000000000u));
}

static inline uint64_t netem_fnv(uint64_t hash, const unsigned char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ull;
    return hash;
}

/* FNV-1a 64 over the message, its sum field counted as 0. */
static inline uint64_t netem_sum(const unsigned char *msg, size_t size)
{
    struct netem_head head;
    uint64_t hash = 0xcbf29ce484222325ull;
    memcpy(&head, msg, sizeof head);
    head.sum = 0;
    hash = netem_fnv(hash, (const unsigned char *)&head, sizeof head);
    return netem_fnv(hash, msg + sizeof head, size - sizeof head);
}

/* Writes head at msg, fills the rest of head->size bytes from seed and seals the checksum. */
static inline void netem_seal(unsigned char *msg, struct netem_head *head, uint64_t seed)
{
    size_t i;
    uint64_t x = seed | 1u;
    for (i = sizeof *head; i < head->size; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        msg[i] = (unsigned char)x;
    }
    head->sum = 0;
    memcpy(msg, head, sizeof *head);
    head->sum = netem_sum(msg, (size_t)head->size);
    memcpy(msg, head, sizeof *head);
}

/* Checks a received message of actual bytes: the magic, the kind, the size it claims and the
 * checksum. Fills head; returns NULL, or what is wrong. */
static inline const char *netem_check(const unsigned char *msg, int64_t actual, uint32_t kind,
                                      struct netem_head *head)
{
    if (actual < (int64_t)sizeof *head)
        return "shorter than a header";
    memcpy(head, msg, sizeof *head);
    if (head->magic != NETEM_MAGIC)
        return "bad magic";
    if (head->kind != kind)
        return "wrong kind";
    if (head->size != (uint64_t)actual)
        return "size differs from the bytes received";
    if (head->sum != netem_sum(msg, (size_t)actual))
        return "checksum mismatch";
    return NULL;
}

static inline double netem_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* NETEM_WIRE_H */
