/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A C99 program written only against the standalone BMI library's header (bmi-standalone/),
 * speaking the example protocol of examples/pvfs_proto.h, so it can serve the OrangeFS-dialect
 * pvfs_client and call the OrangeFS-dialect pvfs_server (tests/dialects/dialects_test.py).
 *
 *   standalone_api_peer serve LISTEN          answers requests until a SHUTDOWN; a LISTEN
 *                                         without a port gets one (BMI_TCP_GET_PORT)
 *   standalone_api_peer protocol NAME         exit 0 if BMI_TRANSPORT_METHODS_STRING names NAME
 *   standalone_api_peer call ADDR [--iterations N] [--size BYTES] [--notes N] [--shutdown]
 *
 * Besides requests (class 0, through the unsuffixed macros), a caller may send notes under
 * message class 7 before its requests; the server must see each note only through
 * BMI_testunexpected_class(.., 7, ..) and each request only through class 0, and reports the
 * count in its DONE line. Exit status 0 only if every check held. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmi.h"
#include "pvfs_proto.h"

#define NOTE_MAGIC 0x4e4f5445u /* "NOTE" */
#define NOTE_CLASS 7
#define NOTE_SIZE 64
#define WAIT_MS 20000

static int fail(const char *what, int rc)
{
    fprintf(stderr, "standalone_api_peer: %s: %s\n", what, rc < 0 ? bmi_status_string(rc) : "");
    return 1;
}

/* Waits for one operation; 0 and its error and size, or -1 after WAIT_MS. */
static int wait_op(bmi_op_id_t id, bmi_context_id ctx, bmi_error_code_t *error, bmi_size_t *actual)
{
    int waited, outcount = 0;
    void *user = NULL;
    for (waited = 0; waited < WAIT_MS; waited += 100) {
        if (BMI_test(id, &outcount, error, actual, &user, 100, ctx) < 0)
            return -1;
        if (outcount == 1)
            return 0;
    }
    return -1;
}

/* Posts a send (expected, or unexpected of a class) and waits for it; 0 when it went out. */
static int send_and_wait(BMI_addr_t to, const void *buf, bmi_size_t size, bmi_msg_tag_t tag,
                         int unexpected_class, bmi_context_id ctx)
{
    bmi_op_id_t id;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    int rc = unexpected_class < 0
                 ? BMI_post_send(&id, to, buf, size, BMI_EXT_ALLOC, tag, NULL, ctx, NULL)
                 : BMI_post_sendunexpected_class(&id, to, buf, size, BMI_EXT_ALLOC, tag,
                                                 (uint8_t)unexpected_class, NULL, ctx, NULL);
    if (rc == 1)
        return 0;
    if (rc < 0 || wait_op(id, ctx, &error, &actual) != 0 || error != 0)
        return -1;
    return 0;
}

static void fill_note(unsigned char *note, uint32_t index)
{
    uint32_t magic = NOTE_MAGIC;
    memcpy(note, &magic, 4);
    memcpy(note + 4, &index, 4);
    pvfs_pattern_fill(note + 8, NOTE_SIZE - 8, index);
}

static int note_ok(const struct BMI_unexpected_info *info)
{
    uint32_t magic, index;
    const unsigned char *p = info->buffer;
    if (info->error_code != 0 || info->size != NOTE_SIZE)
        return 0;
    memcpy(&magic, p, 4);
    memcpy(&index, p + 4, 4);
    return magic == NOTE_MAGIC && pvfs_pattern_check(p + 8, NOTE_SIZE - 8, index) == NOTE_SIZE - 8;
}

/* Answers one request; 1 if it was a SHUTDOWN, 0 for another, -1 on failure. */
static int answer(const struct BMI_unexpected_info *info, bmi_context_id ctx)
{
    struct pvfs_request req;
    struct pvfs_response head;
    unsigned char *buf;
    int rc;
    if (info->error_code != 0 || info->size != (bmi_size_t)sizeof(req))
        return -1;
    memcpy(&req, info->buffer, sizeof(req));
    if (req.magic != PVFS_PROTO_MAGIC || req.response_size < sizeof(head) ||
        req.response_size > PVFS_MAX_RESPONSE)
        return -1; /* a note under class 0 lands here too */
    buf = malloc((size_t)req.response_size);
    if (buf == NULL)
        return -1;
    head.magic = PVFS_PROTO_MAGIC;
    head.status = 0;
    head.request_id = req.request_id;
    head.size = req.response_size;
    memcpy(buf, &head, sizeof(head));
    pvfs_pattern_fill(buf + sizeof(head), (size_t)req.response_size - sizeof(head), req.request_id);
    rc = send_and_wait(info->addr, buf, (bmi_size_t)req.response_size, info->tag, -1, ctx);
    free(buf);
    if (rc != 0)
        return -1;
    return req.op == PVFS_OP_SHUTDOWN;
}

/* Prints the address clients use. As Mercury's na_bmi does on every protocol, a portless
 * listen address is completed with the port BMI_TCP_GET_PORT reports, and the server looks
 * its own full address up. */
static int print_address(const char *listen)
{
    const char *host = strstr(listen, "://");
    char full[256];
    BMI_addr_t self;
    int port = 0, rc;
    if (host != NULL && strchr(host + 3, ':') == NULL) {
        rc = BMI_get_info(0, BMI_TCP_GET_PORT, &port);
        if (rc < 0 || port <= 0)
            return fail("BMI_get_info(BMI_TCP_GET_PORT)", rc);
        snprintf(full, sizeof full, "%s:%d", listen, port);
    } else {
        snprintf(full, sizeof full, "%s", listen);
    }
    rc = BMI_addr_lookup(&self, full);
    if (rc < 0)
        return fail("BMI_addr_lookup of our own address", rc);
    printf("ADDR %s\n", full);
    fflush(stdout);
    return 0;
}

#ifndef BMI_SUPPORTS_TRANSPORT_METHOD_GETINFO
#error "the standalone header must announce BMI_TRANSPORT_METHODS_STRING (Mercury's na_bmi asks)"
#endif

/* Mercury's na_bmi_check_protocol: the protocol is usable only if the methods string names
 * it. Prints the names; 0 if PROTOCOL is among them. */
static int check_protocol(const char *protocol)
{
    char *methods = NULL, *name;
    int found = 0, count = BMI_get_info(0, BMI_TRANSPORT_METHODS_STRING, &methods);
    if (count <= 0 || methods == NULL)
        return fail("BMI_get_info(BMI_TRANSPORT_METHODS_STRING)", count);
    printf("PROTOCOLS");
    for (name = strtok(methods, ","); name != NULL; name = strtok(NULL, ",")) {
        printf(" %s", name);
        found = found || strcmp(name, protocol) == 0;
    }
    printf("\n");
    free(methods);
    return found ? 0 : 1;
}

static int serve(const char *listen)
{
    char method[32];
    bmi_context_id ctx;
    struct BMI_unexpected_info info;
    uint64_t requests = 0, notes = 0;
    int rc, outcount, done = 0, bad = 0;

    rc = BMI_initialize(pvfs_method_for(listen, method, sizeof(method)), listen, BMI_INIT_SERVER);
    if (rc < 0)
        return fail("BMI_initialize", rc);
    if (BMI_open_context(&ctx) < 0 || print_address(listen) != 0) {
        BMI_finalize();
        return 1;
    }
    while (!done && !bad) {
        rc = BMI_testunexpected(1, &outcount, &info, 10);
        if (rc < 0 || outcount < 0)
            bad = 1;
        else if (outcount == 1) {
            int answered = answer(&info, ctx);
            requests++;
            done = answered == 1;
            bad = answered < 0;
            BMI_unexpected_free(info.addr, info.buffer);
        }
        rc = BMI_testunexpected_class(1, &outcount, &info, NOTE_CLASS, 0);
        if (rc == 0 && outcount == 1) {
            notes++;
            bad = bad || !note_ok(&info);
            BMI_unexpected_free(info.addr, info.buffer);
        }
    }
    if (bad)
        fprintf(stderr, "standalone_api_peer: a message arrived in the wrong class or damaged\n");
    printf("DONE requests=%" PRIu64 " notes=%" PRIu64 "\n", requests, notes);
    BMI_close_context(ctx);
    rc = BMI_finalize();
    return bad || rc < 0;
}

/* The calls whose meaning is the standalone dialect's own. */
static int check_dialect_calls(const char *scheme)
{
    char *methods = NULL;
    BMI_addr_t bogus;
    int count = BMI_get_info(0, BMI_TRANSPORT_METHODS_STRING, &methods);
    char wanted[32];
    snprintf(wanted, sizeof(wanted), "%s,", scheme);
    if (count < 1 || methods == NULL || strstr(methods, wanted) == NULL) {
        fprintf(stderr, "standalone_api_peer: methods string %s lacks %s\n",
                methods ? methods : "(null)", wanted);
        free(methods);
        return 1;
    }
    free(methods);
    if (BMI_addr_lookup(&bogus, "nonsense") >= 0)
        return fail("lookup of a malformed address succeeded", 0);
    if (BMI_get_info(0, BMI_ZOID_POST_TIMEOUT, &count) != -BMI_ENOSYS)
        return fail("BMI_ZOID_POST_TIMEOUT was not refused", 0);
    return 0;
}

static int send_notes(BMI_addr_t server, int notes, bmi_context_id ctx)
{
    unsigned char note[NOTE_SIZE];
    int i;
    for (i = 0; i < notes; i++) {
        fill_note(note, (uint32_t)i);
        if (i == notes - 1) { /* the last goes as a list of two pieces */
            const void *pieces[2] = {note, note + 10};
            bmi_size_t sizes[2] = {10, NOTE_SIZE - 10};
            bmi_op_id_t id;
            bmi_error_code_t error = 0;
            bmi_size_t actual = 0;
            int rc = BMI_post_sendunexpected_list_class(&id, server, pieces, sizes, 2, NOTE_SIZE,
                                                        BMI_EXT_ALLOC, 1000 + i, NOTE_CLASS, NULL,
                                                        ctx, NULL);
            if (rc < 0 || (rc == 0 && (wait_op(id, ctx, &error, &actual) != 0 || error != 0)))
                return fail("list note", rc);
        } else if (send_and_wait(server, note, NOTE_SIZE, 1000 + i, NOTE_CLASS, ctx) != 0) {
            return fail("note", 0);
        }
    }
    return 0;
}

/* One request and its verified answer. */
static int request(BMI_addr_t server, uint32_t op, uint64_t id, bmi_size_t size,
                   unsigned char *response, bmi_context_id ctx)
{
    struct pvfs_request req;
    struct pvfs_response head;
    bmi_op_id_t recv_id;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    int rc;
    memset(response, 0, (size_t)size);
    rc = BMI_post_recv(&recv_id, server, response, size, &actual, BMI_EXT_ALLOC, (bmi_msg_tag_t)id,
                       NULL, ctx, NULL);
    if (rc < 0)
        return fail("BMI_post_recv", rc);
    req.magic = PVFS_PROTO_MAGIC;
    req.op = op;
    req.request_id = id;
    req.response_size = (uint64_t)size;
    if (send_and_wait(server, &req, sizeof(req), (bmi_msg_tag_t)id, 0, ctx) != 0)
        return fail("request send", 0);
    if (rc == 0 && (wait_op(recv_id, ctx, &error, &actual) != 0 || error != 0))
        return fail("response", error);
    memcpy(&head, response, sizeof(head));
    if (actual != size || head.request_id != id ||
        pvfs_pattern_check(response + sizeof(head), (size_t)size - sizeof(head), id) !=
            (size_t)size - sizeof(head))
        return fail("response damaged", 0);
    return 0;
}

/* A receive nobody answers must end in BMI_ECANCEL once cancelled. */
static int check_cancel(BMI_addr_t server, bmi_context_id ctx)
{
    unsigned char buf[16];
    bmi_op_id_t id;
    bmi_error_code_t error = 0;
    bmi_size_t actual = 0;
    int rc = BMI_post_recv(&id, server, buf, sizeof(buf), &actual, BMI_EXT_ALLOC, 0x7ffffff0, NULL,
                           ctx, NULL);
    if (rc != 0 || BMI_cancel(id, ctx) < 0 || wait_op(id, ctx, &error, &actual) != 0 ||
        error != -BMI_ECANCEL)
        return fail("cancel", error);
    return 0;
}

static int call(const char *addr, uint64_t iterations, uint64_t size, int notes, int shutdown)
{
    char method[32];
    bmi_context_id ctx;
    BMI_addr_t server;
    unsigned char *response;
    uint64_t i;
    int rc, failed;

    rc = BMI_initialize(pvfs_method_for(addr, method, sizeof(method)), NULL, 0);
    if (rc < 0)
        return fail("BMI_initialize", rc);
    if (BMI_open_context(&ctx) < 0 || BMI_addr_lookup(&server, addr) < 0) {
        BMI_finalize();
        return fail("context or lookup", 0);
    }
    response = malloc((size_t)size);
    failed = response == NULL || check_dialect_calls(method + 4) != 0 ||
             send_notes(server, notes, ctx) != 0;
    for (i = 0; i < iterations && !failed; i++)
        failed = request(server, PVFS_OP_GETATTR, i + 1, (bmi_size_t)size, response, ctx) != 0;
    failed = failed || check_cancel(server, ctx) != 0;
    if (!failed && shutdown)
        failed =
            request(server, PVFS_OP_SHUTDOWN, iterations + 1, (bmi_size_t)size, response, ctx) != 0;
    free(response);
    BMI_close_context(ctx);
    rc = BMI_finalize();
    if (!failed && rc == 0)
        printf("OK iterations=%" PRIu64 " notes=%d\n", iterations, notes);
    return failed || rc < 0;
}

int main(int argc, char **argv)
{
    uint64_t iterations = 10, size = 4096, notes = 0;
    int shutdown = 0, a, ok = 1;
    if (argc >= 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    if (argc == 3 && strcmp(argv[1], "protocol") == 0)
        return check_protocol(argv[2]);
    if (argc < 3 || strcmp(argv[1], "call") != 0) {
        fprintf(
            stderr,
            "usage: %s serve LISTEN | protocol NAME | call ADDR [--iterations N] [--size BYTES] "
            "[--notes N] [--shutdown]\n",
            argv[0]);
        return 2;
    }
    for (a = 3; a < argc && ok; a++) {
        if (strcmp(argv[a], "--shutdown") == 0)
            shutdown = 1;
        else if (a + 1 < argc && strcmp(argv[a], "--iterations") == 0)
            ok = pvfs_parse_count(argv[++a], &iterations) == 0;
        else if (a + 1 < argc && strcmp(argv[a], "--size") == 0)
            ok = pvfs_parse_count(argv[++a], &size) == 0;
        else if (a + 1 < argc && strcmp(argv[a], "--notes") == 0)
            ok = pvfs_parse_count(argv[++a], &notes) == 0;
        else
            ok = 0;
    }
    if (!ok || size < sizeof(struct pvfs_response) || size > PVFS_MAX_RESPONSE || notes > 1000)
        return fail("bad arguments", 0);
    return call(argv[2], iterations, size, (int)notes, shutdown);
}
