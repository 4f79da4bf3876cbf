/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The peer an encrypted libbmi is judged against (issue 39): the same plan and table as
 * raw_tcp_pingpong.c, over TLS 1.3 with OpenSSL on a blocking TCP socket. The only suite
 * offered is TLS_AES_256_GCM_SHA384, the cipher libbmi prefers. The server makes a P-256 key
 * and a self-signed certificate in memory at start; the client does not check it, because what
 * is measured is the record layer after the handshake, not who the server is. Session tickets
 * are off, so nothing but the plan's messages follows the handshake.
 *
 * Built with KERNEL_TLS (ktls_pingpong), OpenSSL hands the record layer to the kernel's `tls`
 * module after the handshake (doc/perf/kernel-tls.md asks whether that is faster than records in
 * user space). OpenSSL 3.0 passes TLS 1.3 receive keys to no kernel, so that build speaks TLS 1.2
 * with the same AES-256-GCM record cipher, and refuses to run (exit 77) unless the kernel took
 * both directions. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "pingpong_common.h"
#include "pp_socket.h"

#ifdef KERNEL_TLS
#define TOOL "ktls_pingpong"
#define SERIES "ktls"
#define SUITE "ECDHE-ECDSA-AES256-GCM-SHA384"
#define PROTOCOL TLS1_2_VERSION
#else
#define TOOL "tls_pingpong"
#define SERIES "tls"
#define SUITE "TLS_AES_256_GCM_SHA384"
#define PROTOCOL TLS1_3_VERSION
#endif

/* Prints what OpenSSL says went wrong after what, and clears its error queue. */
static void tls_error(const char *what)
{
    unsigned long e = ERR_get_error();
    char text[256];
    if (e == 0) {
        fprintf(stderr, TOOL ": %s failed\n", what);
        return;
    }
    ERR_error_string_n(e, text, sizeof(text));
    fprintf(stderr, TOOL ": %s: %s\n", what, text);
    ERR_clear_error();
}

/* A reason for an SSL_read/SSL_write failure a user can act on: a blocking socket whose
 * SO_RCVTIMEO or SO_SNDTIMEO ran out shows up as WANT_READ or WANT_WRITE. */
static void io_error(SSL *ssl, int rc, const char *what)
{
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        fprintf(stderr, TOOL ": %s: timed out\n", what);
        break;
    case SSL_ERROR_ZERO_RETURN:
        fprintf(stderr, TOOL ": %s: peer closed the connection\n", what);
        break;
    case SSL_ERROR_SYSCALL:
        fprintf(stderr, TOOL ": %s: connection lost\n", what);
        break;
    default:
        tls_error(what);
    }
}

/* Moves len bytes through ssl; SSL_write_ex in blocking mode returns only when all are sent. */
static int tls_full(SSL *ssl, void *buf, uint64_t len, int writing)
{
    unsigned char *p = buf;
    while (len > 0) {
        size_t n = 0;
        int rc = writing ? SSL_write_ex(ssl, p, len, &n) : SSL_read_ex(ssl, p, len, &n);
        if (rc <= 0) {
            io_error(ssl, rc, writing ? "write" : "read");
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

/* A fresh P-256 key and a one-day self-signed certificate for it, set on ctx. */
static int add_certificate(SSL_CTX *ctx)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    X509_NAME *name;
    int ok = key != NULL && cert != NULL && X509_set_version(cert, 2) &&
             ASN1_INTEGER_set(X509_get_serialNumber(cert), 1) &&
             X509_gmtime_adj(X509_getm_notBefore(cert), 0) != NULL &&
             X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600) != NULL &&
             X509_set_pubkey(cert, key);
    if (ok) {
        name = X509_get_subject_name(cert);
        ok = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                        (const unsigned char *)"tls_pingpong", -1, -1, 0) &&
             X509_set_issuer_name(cert, name) && X509_sign(cert, key, EVP_sha256()) > 0 &&
             SSL_CTX_use_certificate(ctx, cert) == 1 && SSL_CTX_use_PrivateKey(ctx, key) == 1;
    }
    if (!ok)
        tls_error("certificate");
    X509_free(cert);
    EVP_PKEY_free(key);
    return ok ? 0 : -1;
}

/* A context of one protocol version with the one suite; the server's with its certificate. */
static SSL_CTX *make_context(int server)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
#ifdef KERNEL_TLS
    int suite_ok = ctx != NULL && SSL_CTX_set_cipher_list(ctx, SUITE) == 1;
    if (ctx != NULL)
        SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
#else
    int suite_ok = ctx != NULL && SSL_CTX_set_ciphersuites(ctx, SUITE) == 1;
#endif
    if (!suite_ok || SSL_CTX_set_min_proto_version(ctx, PROTOCOL) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, PROTOCOL) != 1 || SSL_CTX_set_num_tickets(ctx, 0) != 1 ||
        (server && add_certificate(ctx) != 0)) {
        tls_error("context");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    return ctx;
}

/* The handshake over the connected socket fd; NULL after a message. */
static SSL *start_tls(SSL_CTX *ctx, int fd, int server)
{
    SSL *ssl = SSL_new(ctx);
    int rc;
    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1) {
        tls_error("SSL_new");
        SSL_free(ssl);
        return NULL;
    }
    rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (rc != 1) {
        io_error(ssl, rc, "handshake");
        SSL_free(ssl);
        return NULL;
    }
    if (strcmp(SSL_get_cipher_name(ssl), SUITE) != 0 || SSL_version(ssl) != PROTOCOL) {
        fprintf(stderr, TOOL ": negotiated %s %s, not " SUITE "\n", SSL_get_version(ssl),
                SSL_get_cipher_name(ssl));
        SSL_free(ssl);
        return NULL;
    }
#ifdef KERNEL_TLS
    if (!BIO_get_ktls_send(SSL_get_wbio(ssl)) || !BIO_get_ktls_recv(SSL_get_rbio(ssl))) {
        fprintf(stderr, TOOL ": the kernel took the records of %s (is the tls module loaded?)\n",
                BIO_get_ktls_send(SSL_get_wbio(ssl))   ? "sending only"
                : BIO_get_ktls_recv(SSL_get_rbio(ssl)) ? "receiving only"
                                                       : "neither direction");
        SSL_free(ssl);
        return NULL;
    }
#endif
    return ssl;
}

#ifdef KERNEL_TLS
/* Whether the kernel offers the `tls` upper layer protocol (its module is loaded). */
static int kernel_has_tls(void)
{
    char list[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    int found = 0;
    if (f != NULL) {
        found = fgets(list, sizeof(list), f) != NULL && strstr(list, "tls") != NULL;
        fclose(f);
    }
    return found;
}
#endif

struct tls_server
{
    SSL *ssl;
    const struct pp_plan *plan;
    unsigned char *buf; /* pp_round_bytes(plan) */
};

/* Takes in every byte of round c: the echo's message, or the whole window (pp_server_ops). */
static int tls_receive(void *state, const struct pp_cursor *c)
{
    struct tls_server *sv = state;
    if (tls_full(sv->ssl, sv->buf, pp_window(sv->plan, c->size) * c->size, 0) != 0)
        return -1;
    return pp_verify_window(sv->plan, c, sv->buf, TOOL);
}

/* The echo (latency) or the window's ack (bandwidth). */
static int tls_reply(void *state, const struct pp_cursor *c, const struct pp_cursor *next)
{
    struct tls_server *sv = state;
    uint64_t ack = PP_MAGIC;
    (void)next;
    if (sv->plan->mode == PP_LATENCY)
        return tls_full(sv->ssl, sv->buf, c->size, 1);
    return tls_full(sv->ssl, &ack, sizeof(ack), 1);
}

static int run_server(SSL *ssl)
{
    struct pp_plan plan;
    struct tls_server sv = {ssl, &plan, NULL};
    struct pp_server_ops ops = {&sv, tls_receive, tls_reply};
    uint64_t ready = PP_MAGIC;
    int rc = -1;
    if (tls_full(ssl, &plan, sizeof(plan), 0) != 0)
        return -1;
    if (!pp_stream_plan_ok(&plan)) {
        fprintf(stderr, TOOL ": bad hello (many mode has no TLS twin)\n");
        return -1;
    }
    sv.buf = malloc(pp_round_bytes(&plan));
    if (sv.buf == NULL)
        fprintf(stderr, TOOL ": out of memory\n");
    else if (tls_full(ssl, &ready, sizeof(ready), 1) == 0)
        rc = pp_run_server(&plan, TOOL, "", &ops);
    free(sv.buf);
    return rc;
}

/* One ping and its echo (pp_exchange_fn). */
static int ping(void *state, uint64_t size, void *out, void *in)
{
    SSL *ssl = state;
    return tls_full(ssl, out, size, 1) != 0 || tls_full(ssl, in, size, 0) != 0 ? -1 : 0;
}

/* A window of messages, one SSL_write each, then the server's ack (pp_stream_fn). */
static int stream(void *state, uint64_t size, uint64_t window, void *out)
{
    SSL *ssl = state;
    uint64_t ack = 0, i;
    for (i = 0; i < window; i++)
        if (tls_full(ssl, out, size, 1) != 0)
            return -1;
    if (tls_full(ssl, &ack, sizeof(ack), 0) != 0)
        return -1;
    if (ack != PP_MAGIC) {
        fprintf(stderr, TOOL ": bad ack\n");
        return -1;
    }
    return 0;
}

static int run_client(SSL *ssl, const struct pp_options *o)
{
    unsigned char *out = malloc(o->plan.max_size), *in = malloc(o->plan.max_size);
    uint64_t ready = 0;
    int rc = -1;
    if (out == NULL || in == NULL)
        fprintf(stderr, TOOL ": out of memory\n");
    else if (tls_full(ssl, (void *)&o->plan, sizeof(o->plan), 1) == 0 &&
             tls_full(ssl, &ready, sizeof(ready), 0) == 0)
        rc = pp_run_client(o, SERIES, out, in, ping, stream, ssl);
    free(out);
    free(in);
    return rc;
}

/* The server's side: the listening socket's address, one client, its handshake and plan. */
static int serve(SSL_CTX *ctx, int listener, const struct pp_options *o)
{
    SSL *ssl;
    int conn, rc = -1;
    if (pp_socket_print_address(TOOL, listener) != 0)
        return -1;
    conn = pp_socket_accept(TOOL, listener, o->timeout_ms);
    if (conn < 0)
        return -1;
    ssl = start_tls(ctx, conn, 1);
    if (ssl != NULL) {
        rc = run_server(ssl);
        SSL_shutdown(ssl);
        SSL_free(ssl);
    }
    close(conn);
    return rc;
}

int main(int argc, char **argv)
{
    struct pp_options o;
    SSL_CTX *ctx;
    SSL *ssl;
    int fd, rc;
    rc = pp_parse_options(argc, argv, PP_OPT_STREAMS, &o);
    if (rc != 0)
        return rc;
    if (o.plan.mode == PP_MANY) {
        fprintf(stderr, TOOL ": --mode many has no TLS twin\n");
        return 2;
    }
#ifdef KERNEL_TLS
    if (!kernel_has_tls()) {
        fprintf(stderr, TOOL ": this kernel has no tls module loaded; nothing to measure\n");
        return 77;
    }
#endif
    /* A vanished peer must show up as a write error, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    ctx = make_context(o.server);
    if (ctx == NULL)
        return 1;
    fd = pp_socket_open(TOOL, &o);
    if (fd < 0) {
        SSL_CTX_free(ctx);
        return 1;
    }
    if (o.server) {
        rc = serve(ctx, fd, &o);
    } else {
        ssl = start_tls(ctx, fd, 0);
        rc = ssl == NULL ? -1 : run_client(ssl, &o);
        if (ssl != NULL) {
            SSL_shutdown(ssl);
            SSL_free(ssl);
        }
    }
    close(fd);
    SSL_CTX_free(ctx);
    return rc == 0 ? 0 : 1;
}
