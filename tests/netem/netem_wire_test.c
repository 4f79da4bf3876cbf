/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The netem tests' oracle can fail: netem_check accepts a sealed message and refuses it after
 * any one byte is changed, after it is cut short or padded, and when it is of another kind.
 * Without it a test through a faulty network could pass whatever arrived. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>

#include "netem_wire.h"

int main(void)
{
    enum
    {
        size = 3000
    };
    unsigned char *msg = malloc(size + 1);
    struct netem_head head = {NETEM_MAGIC, NETEM_BULK, 3, 41, size, 0, 0, 0, 0}, got;
    int failed = 0, i;
    if (msg == NULL)
        return 2;
    netem_seal(msg, &head, 12345);
    if (netem_check(msg, size, NETEM_BULK, &got) != NULL || got.seq != 41) {
        fprintf(stderr, "a sealed message is refused\n");
        failed++;
    }
    for (i = 0; i < size; i++) {
        msg[i] ^= 0x20;
        if (netem_check(msg, size, NETEM_BULK, &got) == NULL) {
            fprintf(stderr, "a change of byte %d is not seen\n", i);
            failed++;
        }
        msg[i] ^= 0x20;
    }
    if (netem_check(msg, size - 1, NETEM_BULK, &got) == NULL ||
        netem_check(msg, size + 1, NETEM_BULK, &got) == NULL ||
        netem_check(msg, 10, NETEM_BULK, &got) == NULL) {
        fprintf(stderr, "a message of another length is accepted\n");
        failed++;
    }
    if (netem_check(msg, size, NETEM_REPLY, &got) == NULL) {
        fprintf(stderr, "a message of another kind is accepted\n");
        failed++;
    }
    free(msg);
    return failed == 0 ? 0 : 1;
}
