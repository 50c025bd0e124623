/*
 * tlsbench.c - the run's certificate and the tcp reference's TLS sessions
 * (see tlsbench.h). The settings mirror libtern's tls.c, so the two layers
 * pay for the same encryption: TLS 1.3, no tickets, mutual verification.
 */
#include "tlsbench.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define HANDSHAKES_MAX 4096

static SSL_CTX *ctx;
static uint64_t handshake_us[HANDSHAKES_MAX];
static atomic_uint nhandshakes;

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int
ssl_fail(char *err, size_t err_len, const char *what)
{
	unsigned long e = ERR_get_error();

	snprintf(err, err_len, "tls: %s: %s", what,
	         e != 0 && ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "failed");
	ERR_clear_error();
	return -1;
}

static int
write_pem(const char *path, X509 *x, EVP_PKEY *k)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (f == NULL) {
		return 0;
	}
	ok = x != NULL ? PEM_write_X509(f, x)
	               : PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	return fclose(f) == 0 && ok;
}

static int
make_ctx(const char *cert, const char *key, char *err, size_t err_len)
{
	ctx = SSL_CTX_new(TLS_method());
	if (ctx == NULL) {
		return ssl_fail(err, err_len, "context");
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_read_ahead(ctx, 1);
	if (SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_load_verify_locations(ctx, cert, NULL) != 1) {
		return ssl_fail(err, err_len, "certificate");
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return 0;
}

int
tlsbench_make(char *dir, size_t dir_len, char *err, size_t err_len)
{
	const char *tmp = getenv("TMPDIR");
	char cert[512], key[512];
	EVP_PKEY *k = NULL;
	X509 *x = NULL;
	int rc = -1;

	snprintf(dir, dir_len, "%s/tern-bench-tls.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL) {
		snprintf(err, err_len, "tls: cannot make %s: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	k = EVP_EC_gen("P-256");
	x = X509_new();
	if (k == NULL || x == NULL) {
		ssl_fail(err, err_len, "key");
		goto out;
	}
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 7 * 86400);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	                           (const unsigned char *)"tern-bench", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	if (X509_sign(x, k, EVP_sha256()) == 0) {
		ssl_fail(err, err_len, "sign");
		goto out;
	}
	if (!write_pem(cert, x, NULL) || !write_pem(key, NULL, k)) {
		snprintf(err, err_len, "tls: cannot write %s", dir);
		goto out;
	}
	rc = make_ctx(cert, key, err, err_len);
out:
	X509_free(x);
	EVP_PKEY_free(k);
	if (rc != 0) {
		tlsbench_remove(dir);
	}
	return rc;
}

void
tlsbench_remove(const char *dir)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/cert.pem", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/key.pem", dir);
	unlink(path);
	rmdir(dir);
	SSL_CTX_free(ctx);
	ctx = NULL;
}

int
tlsbench_open(struct tlsbench_io *io, int fd, bool server, char *err, size_t err_len)
{
	uint64_t t0 = now_us();
	SSL *ssl;

	io->fd = fd;
	io->ssl = NULL;
	pthread_mutex_init(&io->lock, NULL);
	if (ctx == NULL || (ssl = SSL_new(ctx)) == NULL) {
		return ssl_fail(err, err_len, "session");
	}
	SSL_set_fd(ssl, fd);
	if ((server ? SSL_accept(ssl) : SSL_connect(ssl)) != 1) {
		SSL_free(ssl);
		return ssl_fail(err, err_len, "handshake");
	}
	if (!server) {
		unsigned i = atomic_fetch_add(&nhandshakes, 1);
		if (i < HANDSHAKES_MAX) {
			handshake_us[i] = now_us() - t0;
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	io->ssl = ssl;
	return 0;
}

void
tlsbench_close(struct tlsbench_io *io)
{
	if (io->ssl != NULL) {
		SSL_free(io->ssl);
		io->ssl = NULL;
		pthread_mutex_destroy(&io->lock);
	}
}

static void
wait_fd(int fd, int err)
{
	struct pollfd p = {.fd = fd, .events = err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};

	poll(&p, 1, 100);
}

int
tlsbench_write_all(struct tlsbench_io *io, const void *buf, size_t len)
{
	for (;;) {
		size_t w = 0;
		int rc, err = 0;

		pthread_mutex_lock(&io->lock);
		rc = SSL_write_ex(io->ssl, buf, len, &w);
		if (rc != 1) {
			err = SSL_get_error(io->ssl, rc);
		}
		pthread_mutex_unlock(&io->lock);
		if (rc == 1) {
			return 0;
		}
		if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ) {
			ERR_clear_error();
			return -1;
		}
		/* the same arguments again: OpenSSL holds the record it made */
		wait_fd(io->fd, err);
	}
}

ssize_t
tlsbench_read(struct tlsbench_io *io, void *buf, size_t len, bool block)
{
	for (;;) {
		size_t got = 0;
		int rc, err = 0;

		pthread_mutex_lock(&io->lock);
		errno = 0;
		rc = SSL_read_ex(io->ssl, buf, len, &got);
		if (rc != 1) {
			err = SSL_get_error(io->ssl, rc);
		}
		pthread_mutex_unlock(&io->lock);
		if (rc == 1) {
			return (ssize_t)got;
		}
		if (err == SSL_ERROR_ZERO_RETURN) {
			return 0;
		}
		if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
			ERR_clear_error();
			return errno == 0 || errno == ECONNRESET || errno == EPIPE ? 0 : -1;
		}
		if (!block) {
			return -2;
		}
		wait_fd(io->fd, err);
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void
tlsbench_report(FILE *out)
{
	unsigned n = atomic_load(&nhandshakes);

	if (n == 0) {
		return;
	}
	if (n > HANDSHAKES_MAX) {
		n = HANDSHAKES_MAX;
	}
	qsort(handshake_us, n, sizeof(handshake_us[0]), cmp_u64);
	fprintf(
	    out,
	    "TLS handshakes (tcp layer, client side, TCP connect excluded): %u, median %.0f us, "
	    "max %.0f us\n",
	    n, (double)handshake_us[n / 2], (double)handshake_us[n - 1]);
}
