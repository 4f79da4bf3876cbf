/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The MPI twin of pingpong.c: the same plan, modes and table between MPI ranks. In latency and
 * bandwidth mode rank 0 is the client and rank 1 the server; in many mode rank 0 is the server
 * and every other rank a client. The reporting side is always rank 0. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "pingpong_common.h"

#define TAG_DATA 2
#define TAG_ACK 3

struct peer
{
    int rank;           /* the client's server */
    MPI_Request *reqs;  /* PP_MAX_WINDOW x clients */
    unsigned char *buf; /* server: one round per client, pp_round_bytes each */
    uint64_t stride;
    const struct pp_plan *plan;
    int clients; /* server: ranks 1..clients (many) or rank 0 (else) */
};

static int recv_exact(int from, int tag, void *buf, uint64_t size, const char *what)
{
    MPI_Status st;
    int count = 0;
    if (MPI_Recv(buf, (int)size, MPI_BYTE, from, tag, MPI_COMM_WORLD, &st) != MPI_SUCCESS)
        return -1;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if ((uint64_t)count != size) {
        fprintf(stderr, "mpi_pingpong: %s: got %d bytes, expected %" PRIu64 "\n", what, count,
                size);
        return -1;
    }
    return 0;
}

/* One ping and its pong (pp_exchange_fn). Blocking calls on both sides, as most MPI codes
 * write a ping-pong; the pong cannot arrive before the ping has left, so no deadlock. */
static int ping(void *state, uint64_t size, void *out, void *in)
{
    const struct peer *p = state;
    if (MPI_Send(out, (int)size, MPI_BYTE, p->rank, TAG_DATA, MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    return recv_exact(p->rank, TAG_DATA, in, size, "pong");
}

/* A window of nonblocking sends from one buffer, then the ack (pp_stream_fn). */
static int stream(void *state, uint64_t size, uint64_t window, void *out)
{
    const struct peer *p = state;
    uint64_t ack = 0, i;
    for (i = 0; i < window; i++)
        if (MPI_Isend(out, (int)size, MPI_BYTE, p->rank, TAG_DATA, MPI_COMM_WORLD, &p->reqs[i]) !=
            MPI_SUCCESS)
            return -1;
    if (MPI_Waitall((int)window, p->reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return -1;
    return recv_exact(p->rank, TAG_ACK, &ack, sizeof(ack), "ack");
}

static int client_rank(const struct peer *p, int j)
{
    return p->plan->mode == PP_MANY ? j + 1 : 0;
}

static int server_receive(void *state, const struct pp_cursor *c)
{
    struct peer *p = state;
    uint64_t w = pp_window(p->plan, c->size), i;
    int j, n = 0;
    for (j = 0; j < p->clients; j++)
        for (i = 0; i < w; i++)
            if (MPI_Irecv(p->buf + j * p->stride + i * c->size, (int)c->size, MPI_BYTE,
                          client_rank(p, j), TAG_DATA, MPI_COMM_WORLD,
                          &p->reqs[n++]) != MPI_SUCCESS)
                return -1;
    if (MPI_Waitall(n, p->reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return -1;
    for (j = 0; p->plan->check && j < p->clients; j++)
        for (i = 0; i < w; i++)
            if (pp_verify(p->buf + j * p->stride + i * c->size, c->size, pp_seed(c)) != 0) {
                fprintf(stderr,
                        "mpi_pingpong: checksum mismatch at %" PRIu64 " bytes, round %" PRIu64
                        ", client %d\n",
                        c->size, c->round, j);
                return -1;
            }
    return 0;
}

static int server_reply(void *state, const struct pp_cursor *c, const struct pp_cursor *next)
{
    struct peer *p = state;
    uint64_t ack = PP_MAGIC;
    int j;
    (void)next; /* MPI matches early messages itself: nothing to post ahead */
    if (p->plan->mode == PP_LATENCY)
        return MPI_Send(p->buf, (int)c->size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD) == MPI_SUCCESS
                   ? 0
                   : -1;
    for (j = 0; j < p->clients; j++)
        if (MPI_Send(&ack, sizeof(ack), MPI_BYTE, client_rank(p, j), TAG_ACK, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            return -1;
    return 0;
}

int main(int argc, char **argv)
{
    /* pp_parse_options wants a role and a peer address; MPI supplies both, so we pose as the
     * client of a fixed "peer" and get pingpong's defaults, suffixes and limits unchanged. */
    static const char *const prefix[] = {"--client", "mpi-rank-1", NULL};
    struct pp_options o;
    struct peer p;
    void *out = NULL, *in = NULL;
    int rank = 0, ranks = 0, rc = 0, server, need;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    rc = pp_parse_posing(argc, argv, prefix, NULL, PP_OPT_STREAMS, &o);
    need = rc == 0 ? pp_ranks_needed(&o.plan) : 2;
    if (rc == 0 && ranks != need) {
        if (rank == 0)
            fprintf(stderr, "mpi_pingpong: mode %s needs exactly %d ranks, got %d\n",
                    pp_mode_name(o.plan.mode), need, ranks);
        rc = 2;
    }
    if (rc != 0) {
        /* Every rank parsed the same argv, so all reach this point and leave together. */
        MPI_Finalize();
        return rc;
    }
    /* rank 0's plan is the one timed: a launcher passing different arguments per rank must
     * not split it. */
    MPI_Bcast(&o.plan, (int)sizeof(o.plan), MPI_BYTE, 0, MPI_COMM_WORLD);

    memset(&p, 0, sizeof(p));
    p.plan = &o.plan;
    server = o.plan.mode == PP_MANY ? rank == 0 : rank == 1;
    p.rank = o.plan.mode == PP_MANY ? 0 : 1;
    p.clients = o.plan.mode == PP_MANY ? (int)o.plan.clients : 1;
    p.stride = o.plan.mode == PP_LATENCY ? o.plan.max_size : pp_round_bytes(&o.plan);
    p.reqs = calloc((size_t)PP_MAX_WINDOW * (size_t)p.clients, sizeof(*p.reqs));
    /* Allocated once and touched, so no timed round pays for first-touch page faults. */
    if (server) {
        p.buf = malloc((size_t)(p.stride * (uint64_t)p.clients));
        in = p.buf;
        if (p.buf != NULL)
            memset(p.buf, 0, (size_t)(p.stride * (uint64_t)p.clients));
    } else {
        out = malloc((size_t)o.plan.max_size);
        in = malloc((size_t)o.plan.max_size);
        if (out != NULL && in != NULL) {
            memset(out, 0xa5, (size_t)o.plan.max_size);
            memset(in, 0, (size_t)o.plan.max_size);
        }
    }
    if (p.reqs == NULL || in == NULL || (!server && out == NULL)) {
        fprintf(stderr, "mpi_pingpong: rank %d cannot allocate its buffers\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* MPI calls have no deadline: --timeout-ms is accepted, but the launcher bounds the run
     * (bmi-perf runs mpirun under timeout(1)). */
    if (server) {
        struct pp_server_ops ops = {&p, server_receive, server_reply};
        rc = pp_run_server(&o.plan, "mpi", "mpi-rank-0", &ops);
    } else {
        rc = pp_run_client(&o, "mpi", out, in, ping, stream, &p);
    }
    if (rc != 0)
        MPI_Abort(MPI_COMM_WORLD, 1); /* the peer is blocked in a call that would never end */
    free(in);
    free(out);
    free(p.reqs);
    MPI_Finalize();
    return 0;
}
