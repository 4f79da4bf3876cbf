// SPDX-License-Identifier: LGPL-2.1-or-later
// Proves that real verbs work where the verbs suite runs: two RC queue pairs in one process on
// the first (or $BMI_VERBS_DEVICE) device, connected to each other, do one SEND and one RDMA
// WRITE, and both arrive intact. Exits 77 (skip) when there is no RDMA device.
#define _POSIX_C_SOURCE 200809L

#include <infiniband/verbs.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum
{
    buffer_size = 4096,
    port_num = 1
};

// Generous: a TCG guest on a loaded host can be a thousand times slower than hardware.
static const double completion_timeout_s = 20.0;

static int passed;
static int failed;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (ok) {
        passed++;
    } else {
        failed++;
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct endpoint
{
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    unsigned char *buffer;
};

struct probe
{
    struct ibv_context *context;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_port_attr port;
    union ibv_gid gid;
    int gid_index;
    struct endpoint ends[2];
};

// Waits for `count` successful completions, one of each opcode in `want`, in any order (a
// receive may complete before its send); 0 on success.
static int wait_completions(struct ibv_cq *cq, const enum ibv_wc_opcode *want, int count)
{
    const double deadline = now_s() + completion_timeout_s;
    int seen[2] = {0, 0};
    for (int done = 0; done < count;) {
        struct ibv_wc wc;
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n == 0) {
            if (now_s() > deadline) {
                fprintf(stderr, "verbs_probe: no completion within %.0f s\n", completion_timeout_s);
                return -1;
            }
            continue;
        }
        int match = -1;
        for (int i = 0; n == 1 && i < count; i++) {
            if (!seen[i] && wc.opcode == want[i]) {
                match = i;
            }
        }
        if (n < 0 || wc.status != IBV_WC_SUCCESS || match < 0) {
            fprintf(stderr, "verbs_probe: unexpected completion: status '%s', opcode %d\n",
                    n < 0 ? "poll failed" : ibv_wc_status_str(wc.status), (int)wc.opcode);
            return -1;
        }
        seen[match] = 1;
        done++;
    }
    return 0;
}

// RESET -> INIT -> RTR -> RTS, aimed at the queue pair `remote_qpn` on the same port.
static int connect_qp(const struct probe *p, struct ibv_qp *qp, uint32_t remote_qpn)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = port_num;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = p->port.active_mtu;
    a.dest_qp_num = remote_qpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = port_num;
    a.ah_attr.dlid = p->port.lid;
    // RoCE has no LIDs: the address is the GID, which needs a GRH.
    if (p->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = p->gid;
        a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int create_endpoint(struct probe *p, struct endpoint *e)
{
    struct ibv_qp_init_attr init;
    memset(&init, 0, sizeof init);
    init.send_cq = p->cq;
    init.recv_cq = p->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 4;
    init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    e->buffer = calloc(1, buffer_size);
    if (e->buffer == NULL) {
        return -1;
    }
    e->mr =
        ibv_reg_mr(p->pd, e->buffer, buffer_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    e->qp = ibv_create_qp(p->pd, &init);
    return e->mr != NULL && e->qp != NULL ? 0 : -1;
}

static int post_send(struct endpoint *from, enum ibv_wr_opcode opcode, const struct endpoint *to)
{
    struct ibv_sge sge = {(uintptr_t)from->buffer, buffer_size, from->mr->lkey};
    struct ibv_send_wr wr;
    struct ibv_send_wr *bad;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)to->buffer;
    wr.wr.rdma.rkey = to->mr->rkey;
    return ibv_post_send(from->qp, &wr, &bad);
}

static int post_recv(struct endpoint *e)
{
    struct ibv_sge sge = {(uintptr_t)e->buffer, buffer_size, e->mr->lkey};
    struct ibv_recv_wr wr;
    struct ibv_recv_wr *bad;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(e->qp, &wr, &bad);
}

// Fills the sender's buffer with a pattern, clears the receiver's, and returns whether the
// transfer `opcode` from ends[0] to ends[1] delivered it.
static int transfer(struct probe *p, enum ibv_wr_opcode opcode, unsigned char seed)
{
    struct endpoint *from = &p->ends[0];
    struct endpoint *to = &p->ends[1];
    for (int i = 0; i < buffer_size; i++) {
        from->buffer[i] = (unsigned char)(seed + i * 7);
    }
    memset(to->buffer, 0, buffer_size);
    if (opcode == IBV_WR_SEND && post_recv(to) != 0) {
        return 0;
    }
    if (post_send(from, opcode, to) != 0) {
        return 0;
    }
    static const enum ibv_wc_opcode send_recv[] = {IBV_WC_SEND, IBV_WC_RECV};
    static const enum ibv_wc_opcode write[] = {IBV_WC_RDMA_WRITE};
    if (opcode == IBV_WR_SEND ? wait_completions(p->cq, send_recv, 2) != 0
                              : wait_completions(p->cq, write, 1) != 0) {
        return 0;
    }
    return memcmp(from->buffer, to->buffer, buffer_size) == 0;
}

// Opens the device named by $BMI_VERBS_DEVICE, else the first one; 77 when there is none.
static int open_device(struct probe *p)
{
    int count = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    const char *wanted = getenv("BMI_VERBS_DEVICE");
    struct ibv_device *device = NULL;
    for (int i = 0; list != NULL && i < count; i++) {
        if (wanted == NULL || strcmp(ibv_get_device_name(list[i]), wanted) == 0) {
            device = list[i];
            break;
        }
    }
    if (device == NULL) {
        printf("verbs_probe: SKIP: no RDMA device%s%s (run it through tests/verbs/rxe_vm.sh)\n",
               wanted != NULL ? " named " : "", wanted != NULL ? wanted : "");
        if (list != NULL) {
            ibv_free_device_list(list);
        }
        return 77;
    }
    printf("device %s\n", ibv_get_device_name(device));
    p->context = ibv_open_device(device);
    ibv_free_device_list(list);
    return p->context != NULL ? 0 : 1;
}

int main(void)
{
    struct probe p;
    memset(&p, 0, sizeof p);
    const char *gid_index = getenv("BMI_VERBS_GID_INDEX");
    p.gid_index = gid_index != NULL ? atoi(gid_index) : 0;

    int status = open_device(&p);
    if (status == 77) {
        return 77;
    }
    check(status == 0, "open the device");
    check(status == 0 && ibv_query_port(p.context, port_num, &p.port) == 0 &&
              p.port.state == IBV_PORT_ACTIVE,
          "port 1 is active");
    check(failed == 0 && ibv_query_gid(p.context, port_num, p.gid_index, &p.gid) == 0,
          "query the GID");
    if (failed == 0) {
        p.pd = ibv_alloc_pd(p.context);
        p.cq = p.pd != NULL ? ibv_create_cq(p.context, 8, NULL, NULL, 0) : NULL;
        check(p.cq != NULL && create_endpoint(&p, &p.ends[0]) == 0 &&
                  create_endpoint(&p, &p.ends[1]) == 0,
              "create PD, CQ, two RC QPs and memory regions");
    }
    if (failed == 0) {
        check(connect_qp(&p, p.ends[0].qp, p.ends[1].qp->qp_num) == 0 &&
                  connect_qp(&p, p.ends[1].qp, p.ends[0].qp->qp_num) == 0,
              "connect the QPs to each other");
    }
    if (failed == 0) {
        check(transfer(&p, IBV_WR_SEND, 1), "SEND of 4 KiB arrives intact");
        check(transfer(&p, IBV_WR_RDMA_WRITE, 2), "RDMA WRITE of 4 KiB arrives intact");
    }

    for (int i = 0; i < 2; i++) {
        struct endpoint *e = &p.ends[i];
        if (e->qp != NULL) {
            ibv_destroy_qp(e->qp);
        }
        if (e->mr != NULL) {
            ibv_dereg_mr(e->mr);
        }
        free(e->buffer);
    }
    if (p.cq != NULL) {
        ibv_destroy_cq(p.cq);
    }
    if (p.pd != NULL) {
        ibv_dealloc_pd(p.pd);
    }
    if (p.context != NULL) {
        ibv_close_device(p.context);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
