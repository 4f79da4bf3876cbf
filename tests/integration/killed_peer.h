/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tags shared by killed_peer_server.c and the clients that are killed in the middle of a send. */
#ifndef KILLED_PEER_H
#define KILLED_PEER_H

#define KP_TAG_HELLO 1 /* unexpected: tells the server who the peer is */
#define KP_TAG_BIG 2   /* the large expected message that never finishes */

#endif /* KILLED_PEER_H */
