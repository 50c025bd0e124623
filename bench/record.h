/*
 * record.h - the benchmark record and its MessagePack codec (libmpack).
 *
 * A record is { id: u64, timestamp: u64, source: string, valid: bool,
 * value: f64 }, encoded as a MessagePack array of five. libmpack writes the
 * smallest encoding of each number, so the values are chosen to keep every
 * record at exactly RECORD_BYTES: ids start at 2^32 (always a uint64), the
 * timestamp is nanoseconds since the epoch (always a uint64), the value is a
 * double that a float32 cannot hold, and the source is a 33-byte string
 * (str8). A message is records_per_msg records back to back, so 1024 records
 * make a 64 KiB message.
 *
 * Ids carry the sender: id = (sender + 1) << 32 | sequence, so a receiver
 * fed by many senders checks each one's order on its own.
 */
#ifndef BENCH_RECORD_H
#define BENCH_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RECORD_BYTES       64
#define RECORD_SOURCE_LEN  33
#define RECORD_MAX_SENDERS 65535u

typedef struct record {
	uint64_t id;
	uint64_t timestamp;
	char source[RECORD_SOURCE_LEN + 1];
	bool valid;
	double value;
} record;

/* The id of a sender's seq-th record, and the parts of an id. */
uint64_t record_id(uint32_t sender, uint32_t seq);
uint32_t record_sender(uint64_t id);
uint32_t record_seq(uint64_t id);

/* Fill r as the sender's seq-th record, stamped now. */
void record_make(record *r, uint32_t sender, uint32_t seq, uint64_t now_ns);

/*
 * Encode one record into buf (at least RECORD_BYTES long). Returns the bytes
 * written (always RECORD_BYTES) or -1 if the record does not fit.
 */
int record_encode(const record *r, char *buf, size_t len);

/*
 * Decode one record from the front of buf. Returns the bytes consumed, or -1
 * for a truncated or malformed record (a reason goes to err). Never reads
 * past len.
 */
int record_decode(record *r, const char *buf, size_t len, char *err, size_t err_len);

#endif
