/*
 * tls.h - TLS 1.3 over a non-blocking socket, through OpenSSL: the
 * certificates a node presents and trusts (tls_ctx), and one connection's
 * session (tls_conn) with a handshake, reads and writes that never block.
 *
 * Writes take the caller's segments as they are (no staging copy): each
 * call to SSL_write_ex covers at most one record's worth of a segment. A
 * record the socket could not take whole stays in OpenSSL's buffer, and
 * OpenSSL wants the same plaintext offered again; tls_writev keeps a copy
 * of that one record (at most TLS_RECORD_MAX bytes, only when the socket
 * is full) and counts its bytes as taken, so the caller may release them.
 *
 * Threads: a tls_ctx is read-only once made and shared by every
 * connection. A tls_conn is not safe for two threads at once, reads and
 * writes included: the caller serialises every call on one connection
 * (conn.c takes its write lock around them).
 *
 * Errors: functions that can fail write one sentence into a caller's
 * buffer (tls_ctx_new records it with tern__error, naming the file).
 */
#ifndef TERN_TLS_H
#define TERN_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The largest plaintext in one TLS record. */
#define TLS_RECORD_MAX 16384

struct tls_ctx;
struct tls_conn;

/*
 * Certificates: cert and key (PEM files) are what this node presents; ca
 * (PEM) the authority whose signature a peer's certificate must carry.
 * verify_peer: 1 checks every peer's certificate against ca (and a
 * listener demands one: mutual TLS), 0 checks nothing, -1 means 1 when ca
 * is given. Any of the files may be NULL (a client without a certificate).
 * Errors: TERN_EINVAL naming the file and what is wrong with it.
 */
int tls_ctx_new(struct tls_ctx **out, const char *cert, const char *key, const char *ca,
                int verify_peer);
void tls_ctx_free(struct tls_ctx *t);
/* It has a certificate and key: it can serve a listener. */
bool tls_ctx_has_cert(const struct tls_ctx *t);
/* Peers' certificates are checked (and a listener asks for one). */
bool tls_ctx_verifies(const struct tls_ctx *t);

/* A session on a connected socket; server: it answers the handshake. */
struct tls_conn *tls_conn_new(struct tls_ctx *t, int fd, bool server);
void tls_conn_free(struct tls_conn *s);

enum tls_step { TLS_FAILED = -1, TLS_AGAIN = 0, TLS_DONE = 1 };

/*
 * One step of the handshake: TLS_DONE, TLS_AGAIN (call again when the
 * socket is readable, or writable if *want_write), or TLS_FAILED with the
 * reason in why: a certificate this side refused (the verify result) or
 * the alert the peer sent when it refused ours.
 */
int tls_handshake(struct tls_conn *s, bool *want_write, char *why, size_t whylen);
/* After TLS_DONE: the peer's certificate was checked against the CA, and
 * its common name (printable bytes only, truncated to len - 1); "" when
 * nothing was checked. */
bool tls_peer_verified(const struct tls_conn *s);
void tls_peer_name(const struct tls_conn *s, char *out, size_t len);
/* The first bytes the peer sent (up to 8, as TLS read them): a failed
 * handshake may have met something that is not TLS at all. */
size_t tls_first_bytes(const struct tls_conn *s, const uint8_t **p);
/* The cipher suite agreed, e.g. "TLS_AES_256_GCM_SHA384". */
const char *tls_cipher(const struct tls_conn *s);

/*
 * Read decrypted bytes: > 0 bytes read, 0 the peer closed, -1 nothing now
 * (the socket has no whole record yet), -2 failed (why says so).
 * *more: bytes are still waiting inside the session, decrypted or read
 * ahead from the socket (the socket will not say so: read again).
 */
ssize_t tls_read(struct tls_conn *s, void *buf, size_t len, bool *more, char *why, size_t whylen);

/*
 * Encrypt and write the segments in order: returns how many bytes were
 * taken (all of them, or fewer with *blocked set: the socket is full; call
 * again on EPOLLOUT, with anything), or -1 with why. A record the socket
 * cut is kept and finished first by the next call.
 */
ssize_t tls_writev(struct tls_conn *s, const struct iovec *iov, int n, bool *blocked, char *why,
                   size_t whylen);

/* The first bytes a peer sent look like a TLS record (handshake 0x16 or
 * alert 0x15, then 0x03): -1 needs more bytes, 0 no, 1 yes. */
int tls_looks_like_record(const uint8_t *p, size_t n);
/* A TLS alert record (handshake failure) for a peer that spoke plain tern
 * on a TLS port: it tells that peer "TLS here" in the only way it reads. */
size_t tls_refusal_record(uint8_t *out, size_t len);

#endif
