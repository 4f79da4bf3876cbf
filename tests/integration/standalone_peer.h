/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The messages standalone_peer.c and standalone_legacy_test.cpp exchange. Payload byte i of the
 * message with tag t is (i * 7 + t) & 0xff, so either side can check every byte. */
#ifndef STANDALONE_PEER_H
#define STANDALONE_PEER_H

/* peer -> libbmi: two unexpected messages of two classes, one eager, one rendezvous */
#define SP_TAG_UNEXP_A 1
#define SP_TAG_UNEXP_B 2
#define SP_CLASS_A 1
#define SP_CLASS_B 2
#define SP_SIZE_UNEXP 6
#define SP_TAG_EAGER 10
#define SP_SIZE_EAGER 16384 /* the eager limit itself */
#define SP_TAG_LARGE 11
#define SP_SIZE_LARGE (1 << 20)
/* libbmi -> peer: the replies, one eager and one rendezvous */
#define SP_TAG_REPLY_EAGER 20
#define SP_TAG_REPLY_LARGE 21

#endif /* STANDALONE_PEER_H */
