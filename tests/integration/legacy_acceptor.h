/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The messages legacy_acceptor_client.c sends and legacy_acceptor_test.cpp expects. */
#ifndef LEGACY_ACCEPTOR_H
#define LEGACY_ACCEPTOR_H

#define LA_TAG_UNEXPECTED 1
#define LA_TAG_EAGER 3
#define LA_TAG_LARGE 4
#define LA_TAG_REPLY (-7) /* the acceptor's answer, an OrangeFS EAGER frame */

#define LA_SIZE_UNEXPECTED 6
#define LA_SIZE_EAGER 100
#define LA_SIZE_LARGE 100000 /* over the 16 KiB eager limit: a legacy REND frame */
#define LA_SIZE_REPLY 50

#endif /* LEGACY_ACCEPTOR_H */
