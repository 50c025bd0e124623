/*
 * tls.c - TLS 1.3 sessions on non-blocking sockets, through OpenSSL.
 *
 * The socket is reached through a BIO of our own that sends with
 * MSG_NOSIGNAL: OpenSSL's socket BIO uses write(), and a library must not
 * raise SIGPIPE in its host when a peer vanishes. Session tickets are off
 * (a server would otherwise write after the handshake on its own, and
 * tern's connections are long-lived), and so is every version below 1.3.
 *
 * Kernel TLS would keep conn.c's sendmsg path as it is, but it needs the
 * kernel's tls module; writes here go through SSL_write_ex on the
 * caller's segments instead (see tls.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "error.h"
#include "tls.h"

struct tls_ctx {
	SSL_CTX *ctx;
	bool has_cert;
	bool verify;
};

struct tls_conn {
	SSL *ssl;
	int fd;
	uint8_t first[8]; /* the peer's first bytes, as they came */
	size_t first_len;
	bool verified;
	uint8_t *retry; /* the record the socket cut, offered again (TLS_RECORD_MAX) */
	size_t retry_len;
};

/* ---- the socket BIO ---- */

static BIO_METHOD *sock_method;
static pthread_once_t sock_once = PTHREAD_ONCE_INIT;

static int
bio_fd(BIO *b)
{
	return ((struct tls_conn *)BIO_get_data(b))->fd;
}

static int
bio_write(BIO *b, const char *buf, int len)
{
	ssize_t n;

	BIO_clear_retry_flags(b);
	do {
		n = send(bio_fd(b), buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		BIO_set_retry_write(b);
	}
	return (int)n;
}

static int
bio_read(BIO *b, char *buf, int len)
{
	ssize_t n;

	BIO_clear_retry_flags(b);
	struct tls_conn *s = BIO_get_data(b);
	if (s->first_len == 0) {
		/* keep the first bytes: when the handshake fails, they tell a
		 * plain tern peer from a broken TLS one */
		n = recv(s->fd, s->first, sizeof(s->first), MSG_PEEK | MSG_DONTWAIT);
		s->first_len = n > 0 ? (size_t)n : 0;
	}
	do {
		n = recv(bio_fd(b), buf, (size_t)len, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		BIO_set_retry_read(b);
	}
	return (int)n;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int
bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void
make_sock_method(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tern socket");

	if (m == NULL) {
		return;
	}
	BIO_meth_set_write(m, bio_write);
	BIO_meth_set_read(m, bio_read);
	BIO_meth_set_ctrl(m, bio_ctrl);
	BIO_meth_set_create(m, bio_create);
	sock_method = m;
}

/* ---- errors ---- */

/* The first reason OpenSSL queued, e.g. "certificate verify failed". */
static const char *
ssl_reason(unsigned long *code)
{
	unsigned long e = ERR_get_error();
	const char *r;

	*code = e;
	if (e == 0) {
		return "unknown error";
	}
	r = ERR_reason_error_string(e);
	return r != NULL ? r : "unknown error";
}

static void
explain(SSL *ssl, int err, char *why, size_t whylen)
{
	long vr = SSL_get_verify_result(ssl);
	unsigned long code = 0;
	int saved = errno;

	if (vr != X509_V_OK && SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE) {
		ERR_clear_error();
		snprintf(why, whylen, "TLS: refused the peer's certificate: %s",
		         X509_verify_cert_error_string(vr));
		return;
	}
	if (err == SSL_ERROR_ZERO_RETURN ||
	    (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && saved == 0)) {
		snprintf(why, whylen, "TLS: the peer closed the connection");
		return;
	}
	if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
		snprintf(why, whylen, "TLS: %s", strerror(saved));
		return;
	}
	const char *reason = ssl_reason(&code);
	ERR_clear_error();
	/* a received alert is reported as SSL_AD_REASON_OFFSET + its code */
	if (ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) >= SSL_AD_REASON_OFFSET) {
		snprintf(why, whylen, "TLS: the peer refused the handshake (%s)", reason);
		return;
	}
	snprintf(why, whylen, "TLS: %s", reason);
}

/* ---- certificates ---- */

static int
file_error(const char *key, const char *path, const char *what)
{
	unsigned long code;
	const char *reason = ERR_peek_error() != 0 ? ssl_reason(&code) : NULL;

	ERR_clear_error();
	if (reason != NULL) {
		return tern__error(TERN_EINVAL, "%s '%s': %s (%s)", key, path, what, reason);
	}
	return tern__error(TERN_EINVAL, "%s '%s': %s", key, path, what);
}

/* A file that cannot be opened gets the system's words, not OpenSSL's. */
static int
readable(const char *key, const char *path)
{
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		return tern__error(TERN_EINVAL, "%s '%s': %s", key, path, strerror(errno));
	}
	fclose(f);
	return 0;
}

static int
load_files(struct tls_ctx *t, const char *cert, const char *key, const char *ca)
{
	int rc;

	if ((cert == NULL) != (key == NULL)) {
		return tern__error(TERN_EINVAL, "tls.cert and tls.key go together: %s is missing",
		                   cert == NULL ? "tls.cert" : "tls.key");
	}
	if (cert != NULL) {
		if ((rc = readable("tls.cert", cert)) != 0 ||
		    (rc = readable("tls.key", key)) != 0) {
			return rc;
		}
		if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
			return file_error("tls.cert", cert, "not a PEM certificate");
		}
		if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
			if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
				ERR_clear_error();
				return tern__error(TERN_EINVAL,
				                   "tls.key '%s': does not match tls.cert '%s'",
				                   key, cert);
			}
			return file_error("tls.key", key, "not a PEM private key");
		}
		if (SSL_CTX_check_private_key(t->ctx) != 1) {
			return file_error("tls.key", key, "does not match tls.cert");
		}
		t->has_cert = true;
	}
	if (ca != NULL) {
		if ((rc = readable("tls.ca", ca)) != 0) {
			return rc;
		}
		if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
			return file_error("tls.ca", ca, "holds no PEM certificate");
		}
	}
	return 0;
}

int
tls_ctx_new(struct tls_ctx **out, const char *cert, const char *key, const char *ca,
            int verify_peer)
{
	struct tls_ctx *t;
	int rc;

	pthread_once(&sock_once, make_sock_method);
	if (sock_method == NULL) {
		return tern__error(TERN_ENOMEM, "TLS: cannot set up the socket BIO");
	}
	if (verify_peer > 0 && ca == NULL) {
		return tern__error(TERN_EINVAL,
		                   "tls.verify_peer needs tls.ca: the authority to check peers "
		                   "against");
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->ctx = SSL_CTX_new(TLS_method())) == NULL) {
		free(t);
		return tern__error(TERN_ENOMEM, "TLS: cannot create a context");
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION);
	SSL_CTX_set_num_tickets(t->ctx, 0);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(t->ctx,
	                 SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* take what the socket has in one read, not a record header and then
	 * its body: small records (low latency) would cost two system calls
	 * each. The bytes read ahead are announced by tls_read's *more. */
	SSL_CTX_set_read_ahead(t->ctx, 1);
	if ((rc = load_files(t, cert, key, ca)) != 0) {
		tls_ctx_free(t);
		return rc;
	}
	t->verify = verify_peer < 0 ? ca != NULL : verify_peer > 0;
	/* a client ignores FAIL_IF_NO_PEER_CERT; a server demands a certificate */
	SSL_CTX_set_verify(
	    t->ctx, t->verify ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_NONE,
	    NULL);
	*out = t;
	return 0;
}

void
tls_ctx_free(struct tls_ctx *t)
{
	if (t == NULL) {
		return;
	}
	SSL_CTX_free(t->ctx);
	free(t);
}

bool
tls_ctx_has_cert(const struct tls_ctx *t)
{
	return t->has_cert;
}

bool
tls_ctx_verifies(const struct tls_ctx *t)
{
	return t->verify;
}

/* ---- sessions ---- */

struct tls_conn *
tls_conn_new(struct tls_ctx *t, int fd, bool server)
{
	struct tls_conn *s = calloc(1, sizeof(*s));
	BIO *bio;

	if (s == NULL) {
		return NULL;
	}
	s->retry = malloc(TLS_RECORD_MAX);
	s->ssl = SSL_new(t->ctx);
	bio = BIO_new(sock_method);
	if (s->retry == NULL || s->ssl == NULL || bio == NULL) {
		BIO_free(bio);
		tls_conn_free(s);
		return NULL;
	}
	s->fd = fd;
	BIO_set_data(bio, s);
	SSL_set_bio(s->ssl, bio, bio);
	if (server) {
		SSL_set_accept_state(s->ssl);
	} else {
		SSL_set_connect_state(s->ssl);
	}
	return s;
}

void
tls_conn_free(struct tls_conn *s)
{
	if (s == NULL) {
		return;
	}
	SSL_free(s->ssl);
	free(s->retry);
	free(s);
}

int
tls_handshake(struct tls_conn *s, bool *want_write, char *why, size_t whylen)
{
	int rc, err;

	*want_write = false;
	ERR_clear_error();
	errno = 0;
	rc = SSL_do_handshake(s->ssl);
	if (rc == 1) {
		s->verified = SSL_get_verify_mode(s->ssl) != SSL_VERIFY_NONE &&
		              SSL_get0_peer_certificate(s->ssl) != NULL &&
		              SSL_get_verify_result(s->ssl) == X509_V_OK;
		return TLS_DONE;
	}
	err = SSL_get_error(s->ssl, rc);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		*want_write = err == SSL_ERROR_WANT_WRITE;
		return TLS_AGAIN;
	}
	explain(s->ssl, err, why, whylen);
	return TLS_FAILED;
}

bool
tls_peer_verified(const struct tls_conn *s)
{
	return s->verified;
}

void
tls_peer_name(const struct tls_conn *s, char *out, size_t len)
{
	X509 *cert = SSL_get0_peer_certificate(s->ssl);
	char cn[256];
	int n;

	out[0] = '\0';
	if (!s->verified || cert == NULL || len == 0) {
		return;
	}
	n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
	                              (int)sizeof(cn));
	if (n <= 0) {
		return;
	}
	/* the name goes into logs and JSON: printable ASCII only */
	size_t i;
	for (i = 0; i + 1 < len && cn[i] != '\0'; i++) {
		unsigned char ch = (unsigned char)cn[i];
		out[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	out[i] = '\0';
}

size_t
tls_first_bytes(const struct tls_conn *s, const uint8_t **p)
{
	*p = s->first;
	return s->first_len;
}

const char *
tls_cipher(const struct tls_conn *s)
{
	const char *name = SSL_get_cipher_name(s->ssl);

	return name != NULL ? name : "?";
}

ssize_t
tls_read(struct tls_conn *s, void *buf, size_t len, bool *more, char *why, size_t whylen)
{
	size_t got = 0;
	int err;

	*more = false;
	ERR_clear_error();
	errno = 0;
	if (SSL_read_ex(s->ssl, buf, len, &got) == 1) {
		*more = SSL_has_pending(s->ssl) != 0;
		return (ssize_t)got;
	}
	err = SSL_get_error(s->ssl, 0);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (err == SSL_ERROR_ZERO_RETURN ||
	    (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)) {
		ERR_clear_error();
		return 0;
	}
	explain(s->ssl, err, why, whylen);
	return -2;
}

/* Write one record's worth; 1 written, 0 the socket is full, -1 failed. */
static int
write_record(struct tls_conn *s, const void *p, size_t n, size_t *written, char *why, size_t whylen)
{
	int err;

	ERR_clear_error();
	errno = 0;
	if (SSL_write_ex(s->ssl, p, n, written) == 1) {
		return 1;
	}
	err = SSL_get_error(s->ssl, 0);
	if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
		return 0;
	}
	explain(s->ssl, err, why, whylen);
	return -1;
}

ssize_t
tls_writev(struct tls_conn *s, const struct iovec *iov, int n, bool *blocked, char *why,
           size_t whylen)
{
	size_t total = 0, w = 0;
	int rc;

	*blocked = false;
	if (s->retry_len > 0) {
		rc = write_record(s, s->retry, s->retry_len, &w, why, whylen);
		if (rc <= 0) {
			*blocked = rc == 0;
			return rc == 0 ? 0 : -1;
		}
		s->retry_len = 0;
	}
	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left > 0) {
			/* one record a call: a cut one is exactly these bytes */
			size_t chunk = left < TLS_RECORD_MAX ? left : TLS_RECORD_MAX;
			rc = write_record(s, p, chunk, &w, why, whylen);
			if (rc < 0) {
				return -1;
			}
			if (rc == 0) {
				/* OpenSSL holds this record encrypted and wants the same
				 * plaintext again: keep it, and count it as taken */
				memcpy(s->retry, p, chunk);
				s->retry_len = chunk;
				*blocked = true;
				return (ssize_t)(total + chunk);
			}
			p += w;
			left -= w;
			total += w;
		}
	}
	return (ssize_t)total;
}

int
tls_looks_like_record(const uint8_t *p, size_t n)
{
	if (n == 0) {
		return -1;
	}
	if (p[0] != 0x16 && p[0] != 0x15) {
		return 0;
	}
	if (n < 2) {
		return -1;
	}
	return p[1] == 0x03;
}

size_t
tls_refusal_record(uint8_t *out, size_t len)
{
	/* alert record, TLS 1.2 framing, fatal (2) handshake_failure (40) */
	static const uint8_t alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};

	if (len < sizeof(alert)) {
		return 0;
	}
	memcpy(out, alert, sizeof(alert));
	return sizeof(alert);
}
