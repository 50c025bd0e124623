/*
 * fuzz_tls.c - the bytes a peer sends on a tls:// connection before the
 * TLS handshake is over: what a tern client reads instead of (or as) a
 * ServerHello.
 *
 * The input is written to the far end of a socket pair, which is then
 * closed; a client session (tls.c, no certificate, nothing verified) runs
 * its handshake over the near end until it ends. Properties: static bytes
 * can never complete a TLS 1.3 handshake, so it fails, and within a bounded
 * number of steps (no spin, no hang); the reason is one printable line; the
 * first bytes the session kept are the input's; and the classification
 * that tells a plain tern peer from TLS (tls_looks_like_record, the
 * preamble's magic) agrees with the bytes.
 */
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "tls.h"

/* An input larger than the socket pair's buffers would need a writer
 * thread; the handshake has failed long before this many bytes. */
#define INPUT_MAX 65536

static void
check_classify(const uint8_t *data, size_t size)
{
	int r = tls_looks_like_record(data, size);

	if (size == 0) {
		FUZZ_CHECK(r == -1);
	} else if (data[0] != 0x15 && data[0] != 0x16) {
		FUZZ_CHECK(r == 0);
	} else if (size == 1) {
		FUZZ_CHECK(r == -1);
	} else {
		FUZZ_CHECK(r == (data[1] == 0x03));
	}
	/* tern's preamble is never taken for TLS, nor TLS for tern */
	if (size >= 4 && memcmp(data, "TERN", 4) == 0) {
		FUZZ_CHECK(r == 0);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tls_ctx *ctx;
	struct tls_conn *s;
	char why[200] = "";
	uint8_t sink[4096];
	const uint8_t *first;
	size_t nfirst;
	int sv[2], rc = TLS_AGAIN, steps;

	check_classify(data, size);
	if (size > INPUT_MAX) {
		return 0;
	}
	if (ctx == NULL && tls_ctx_new(&ctx, NULL, NULL, NULL, 0) != 0) {
		abort();
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) {
		abort();
	}
	int big = 4 * INPUT_MAX;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	s = tls_conn_new(ctx, sv[0], false);
	FUZZ_CHECK(s != NULL);
	if (size > 0) {
		FUZZ_CHECK(send(sv[1], data, size, MSG_NOSIGNAL) == (ssize_t)size);
	}
	shutdown(sv[1], SHUT_WR);
	/* every step either consumes input or ends: twice a byte is plenty */
	for (steps = 0; steps < 2 * (int)size + 16 && rc == TLS_AGAIN; steps++) {
		bool want_write;
		rc = tls_handshake(s, &want_write, why, sizeof(why));
		while (recv(sv[1], sink, sizeof(sink), MSG_DONTWAIT) > 0) {
			/* the ClientHello and alerts: read so writes never block */
		}
	}
	FUZZ_CHECK(rc == TLS_FAILED);
	FUZZ_CHECK(why[0] != '\0');
	for (const char *p = why; *p != '\0'; p++) {
		FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
	}
	nfirst = tls_first_bytes(s, &first);
	FUZZ_CHECK(nfirst <= 8 && nfirst <= size);
	FUZZ_CHECK(nfirst == 0 || memcmp(first, data, nfirst) == 0);
	FUZZ_CHECK(size == 0 || nfirst > 0);
	tls_conn_free(s);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
