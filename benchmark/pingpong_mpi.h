/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pingpong's main under mpirun (built as pingpong_mpi): the ranks take the roles mpi_pingpong
 * gives them and the server's BMI address travels by MPI_Bcast, so one mpirun line spans
 * nodes. Included at the end of pingpong.c, which it completes; not a header of its own. */
#include <mpi.h>

#define PP_ADDR_MAX 512

static int server_rank;

static const char *share_by_mpi(const char *addr, int server)
{
    static char text[PP_ADDR_MAX];
    if (server) {
        memset(text, 0, sizeof(text));
        if (addr != NULL && strlen(addr) < sizeof(text))
            strcpy(text, addr);
    }
    MPI_Bcast(text, sizeof(text), MPI_CHAR, server_rank, MPI_COMM_WORLD);
    return text[0] != '\0' ? text : NULL;
}

int main(int argc, char **argv)
{
    /* "--server" first, so the listen address defaults as pingpong's does and a user's own
     * "--server ADDR" (e.g. tcp://HOSTNAME:0 across nodes, or shm://NAME) overrides it. */
    static const char *const prefix[] = {"--server", NULL};
    struct pp_options o;
    int rank = 0, ranks = 0, rc, need;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    rc = pp_parse_posing(argc, argv, prefix, NULL, PP_OPT_METHODS | PP_OPT_STREAMS, &o);
    need = rc == 0 ? pp_ranks_needed(&o.plan) : 2;
    if (rc == 0 && ranks != need) {
        if (rank == 0)
            fprintf(stderr, "pingpong_mpi: mode %s needs exactly %d ranks, got %d\n",
                    pp_mode_name(o.plan.mode), need, ranks);
        rc = 2;
    }
    if (rc != 0) {
        MPI_Finalize();
        return rc;
    }
    MPI_Bcast(&o.plan, (int)sizeof(o.plan), MPI_BYTE, 0, MPI_COMM_WORLD);
    /* As in mpi_pingpong: rank 0 always prints the table. */
    server_rank = o.plan.mode == PP_MANY ? 0 : 1;
    o.server = rank == server_rank;
    rc = run_role(&o, share_by_mpi, 1);
    if (rc != 0 && rc != PP_EXIT_SKIP)
        MPI_Abort(MPI_COMM_WORLD, rc); /* a peer may wait on us forever otherwise */
    MPI_Finalize();
    return rc;
}
