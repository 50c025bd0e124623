/*
 * escape.c - payload escaping, JSON strings and base64 for `tern sub`.
 *
 * Every function appends to an outbuf and checks the size it needs before it
 * grows the buffer, so a payload of any length either fits or fails with
 * TERN_ENOMEM; nothing is written past the buffer.
 */
#include "escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

int
outbuf_reserve(outbuf *ob, size_t extra)
{
	size_t need;
	size_t cap;
	char *grown;

	if (extra > SIZE_MAX - ob->len - 1) {
		return TERN_ENOMEM;
	}
	need = ob->len + extra + 1;
	if (need <= ob->cap) {
		return 0;
	}
	cap = ob->cap > 0 ? ob->cap : 256;
	while (cap < need) {
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	}
	grown = realloc(ob->data, cap);
	if (grown == NULL) {
		return TERN_ENOMEM;
	}
	ob->data = grown;
	ob->cap = cap;
	return 0;
}

int
outbuf_append(outbuf *ob, const void *data, size_t len)
{
	int rc = outbuf_reserve(ob, len);

	if (rc != 0) {
		return rc;
	}
	if (len > 0) {
		memcpy(ob->data + ob->len, data, len);
	}
	ob->len += len;
	ob->data[ob->len] = '\0';
	return 0;
}

int
outbuf_append_str(outbuf *ob, const char *s)
{
	return outbuf_append(ob, s, strlen(s));
}

void
outbuf_free(outbuf *ob)
{
	free(ob->data);
	ob->data = NULL;
	ob->len = 0;
	ob->cap = 0;
}

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 if there is none. */
static size_t
utf8_seq(const unsigned char *p, size_t left)
{
	unsigned char c = p[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80) {
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (left < n) {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) {
			return 0;
		}
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff)) {
		return 0;
	}
	return n;
}

bool
utf8_valid(const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_seq(p + i, len - i);
		if (n == 0) {
			return false;
		}
		i += n;
	}
	return true;
}

static const char hex_digits[] = "0123456789abcdef";

int
escape_payload(outbuf *ob, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t i = 0;
	char *w;
	int rc;

	/* worst case: every byte becomes \xHH */
	if (len > (SIZE_MAX - 1) / 4) {
		return TERN_ENOMEM;
	}
	rc = outbuf_reserve(ob, len * 4);
	if (rc != 0) {
		return rc;
	}
	w = ob->data + ob->len;
	while (i < len) {
		unsigned char c = p[i];
		size_t n;

		if (c == '\\') {
			*w++ = '\\';
			*w++ = '\\';
			i++;
			continue;
		}
		if (c == '\n' || c == '\t' || c == '\r') {
			*w++ = '\\';
			*w++ = c == '\n' ? 'n' : (c == '\t' ? 't' : 'r');
			i++;
			continue;
		}
		n = c >= 0x20 && c != 0x7f ? utf8_seq(p + i, len - i) : 0;
		if (n == 0) {
			*w++ = '\\';
			*w++ = 'x';
			*w++ = hex_digits[c >> 4];
			*w++ = hex_digits[c & 0xf];
			i++;
			continue;
		}
		memcpy(w, p + i, n);
		w += n;
		i += n;
	}
	ob->len = (size_t)(w - ob->data);
	ob->data[ob->len] = '\0';
	return 0;
}

int
escape_json_string(outbuf *ob, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t i = 0;
	char *w;
	int rc;

	/* worst case: every byte becomes \u00HH (6) or U+FFFD (3); plus quotes */
	if (len > (SIZE_MAX - 3) / 6) {
		return TERN_ENOMEM;
	}
	rc = outbuf_reserve(ob, len * 6 + 2);
	if (rc != 0) {
		return rc;
	}
	w = ob->data + ob->len;
	*w++ = '"';
	while (i < len) {
		unsigned char c = p[i];
		size_t n;

		if (c == '"' || c == '\\') {
			*w++ = '\\';
			*w++ = (char)c;
			i++;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			const char *short_esc = NULL;
			switch (c) {
			case '\n':
				short_esc = "\\n";
				break;
			case '\t':
				short_esc = "\\t";
				break;
			case '\r':
				short_esc = "\\r";
				break;
			default:
				break;
			}
			if (short_esc != NULL) {
				memcpy(w, short_esc, 2);
				w += 2;
			} else {
				memcpy(w, "\\u00", 4);
				w[4] = hex_digits[c >> 4];
				w[5] = hex_digits[c & 0xf];
				w += 6;
			}
			i++;
			continue;
		}
		n = utf8_seq(p + i, len - i);
		if (n == 0) {
			memcpy(w, "\xef\xbf\xbd", 3);
			w += 3;
			i++;
			continue;
		}
		memcpy(w, p + i, n);
		w += n;
		i += n;
	}
	*w++ = '"';
	ob->len = (size_t)(w - ob->data);
	ob->data[ob->len] = '\0';
	return 0;
}

int
base64_encode(outbuf *ob, const void *data, size_t len)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	size_t groups = len / 3 + (len % 3 != 0);
	char *w;
	int rc;

	if (groups > (SIZE_MAX - 1) / 4) {
		return TERN_ENOMEM;
	}
	rc = outbuf_reserve(ob, groups * 4);
	if (rc != 0) {
		return rc;
	}
	w = ob->data + ob->len;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t left = len - i;

		if (left > 1) {
			v |= (uint32_t)p[i + 1] << 8;
		}
		if (left > 2) {
			v |= p[i + 2];
		}
		*w++ = alphabet[(v >> 18) & 63];
		*w++ = alphabet[(v >> 12) & 63];
		*w++ = left > 1 ? alphabet[(v >> 6) & 63] : '=';
		*w++ = left > 2 ? alphabet[v & 63] : '=';
	}
	ob->len = (size_t)(w - ob->data);
	ob->data[ob->len] = '\0';
	return 0;
}
