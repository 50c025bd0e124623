/*
 * escape.h - turning message payloads into text for `tern sub`.
 *
 * Payloads are bytes. On a terminal or in a pipe one message must stay one
 * line, so a newline, a tab, a backslash and every byte that is not part of
 * printable UTF-8 text is escaped (\n, \t, \\, \xHH). For JSON output a
 * payload that is valid UTF-8 goes out as a JSON string, anything else as
 * base64.
 */
#ifndef TERN_NODE_ESCAPE_H
#define TERN_NODE_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* A growable byte buffer; the hot path reuses one between messages. */
typedef struct outbuf {
	char *data;
	size_t len;
	size_t cap;
} outbuf;

/* Make room for extra more bytes. Returns 0 or TERN_ENOMEM. */
int outbuf_reserve(outbuf *ob, size_t extra);
int outbuf_append(outbuf *ob, const void *data, size_t len);
int outbuf_append_str(outbuf *ob, const char *s);
void outbuf_free(outbuf *ob);

/* true if data is well-formed UTF-8 (no overlongs, no surrogates). */
bool utf8_valid(const void *data, size_t len);

/* Append the payload escaped for a KEY<TAB>PAYLOAD line. */
int escape_payload(outbuf *ob, const void *data, size_t len);

/* Append a JSON string literal (with quotes) for UTF-8 text. Invalid UTF-8
 * bytes become U+FFFD. */
int escape_json_string(outbuf *ob, const void *data, size_t len);

/* Append data as base64 (RFC 4648, with padding). */
int base64_encode(outbuf *ob, const void *data, size_t len);

#endif
