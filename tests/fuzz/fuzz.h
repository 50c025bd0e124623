/*
 * fuzz.h - what every harness in tests/fuzz/ shares.
 *
 * A harness is one LLVMFuzzerTestOneInput(). libFuzzer drives it when built
 * with clang and -fsanitize=fuzzer; replay.c drives it over a saved corpus in
 * every other build. FUZZ_CHECK states a property the code must keep for any
 * input; it aborts even where NDEBUG turns assert() off, so a broken property
 * is a crash the fuzzer saves and the replay test reports.
 */
#ifndef TERN_FUZZ_H
#define TERN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__,        \
			        #cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/*
 * The receiving node that the frame harnesses and the seed generator agree
 * on: a 4096-byte frame limit (chunk_bytes and CTL_MSG_MAX), 64 KiB
 * messages, a reassembly budget of four messages, channels 0 to 7 open.
 */
#define FUZZ_MAX_PAYLOAD 4096
#define FUZZ_MAX_MESSAGE 65536
#define FUZZ_BUDGET      (4 * FUZZ_MAX_MESSAGE)
#define FUZZ_CHANNELS    8

struct ctl_msg;
struct wire_frame;

/*
 * Header decoded from hdr_len bytes: its canonical encoding is no longer
 * than the input and decodes to the same frame.
 */
void fuzz_header_roundtrip(const struct wire_frame *f, size_t hdr_len, uint64_t max_payload);

/*
 * ctl_decode() the payload into *m. When it is accepted, check that the
 * message encodes again (no longer than the input) and decodes to the same
 * fields. Returns what ctl_decode() returned.
 */
int fuzz_ctl_decode(const uint8_t *p, size_t len, struct ctl_msg *m);

#endif
