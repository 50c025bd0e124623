/*
 * jtext.c - JSON text built piece by piece (see jtext.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "jtext.h"

void
jtext_fixed(struct jtext *t, char *buf, size_t cap)
{
	*t = (struct jtext){.buf = buf, .cap = buf != NULL ? cap : 0};
	if (t->cap > 0) {
		buf[0] = '\0';
	}
}

void
jtext_restart(struct jtext *t)
{
	t->grows = true;
	t->len = 0;
	t->oom = false;
}

/* Room for need more bytes and a NUL, growing if this kind grows. */
static bool
room_for(struct jtext *t, size_t need)
{
	size_t cap;
	char *b;

	if (t->len + need < t->cap) {
		return true;
	}
	if (!t->grows || t->oom) {
		return false;
	}
	for (cap = t->cap ? t->cap * 2 : 4096; cap <= t->len + need; cap *= 2) {
	}
	if ((b = realloc(t->buf, cap)) == NULL) {
		t->oom = true;
		return false;
	}
	t->buf = b;
	t->cap = cap;
	return true;
}

void
jtext_printf(struct jtext *t, const char *fmt, ...)
{
	va_list ap;
	size_t room = t->len < t->cap ? t->cap - t->len : 0;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room > 0 ? t->buf + t->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		return;
	}
	if ((size_t)n >= room && room_for(t, (size_t)n)) {
		va_start(ap, fmt);
		vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
	} else if ((size_t)n >= room && t->grows) {
		return; /* out of memory: the text stops here */
	}
	t->len += (size_t)n;
}

void
jtext_str(struct jtext *t, const char *s)
{
	jtext_printf(t, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			jtext_printf(t, "\\%c", ch);
		} else if (ch < 0x20) {
			jtext_printf(t, "\\u%04x", ch);
		} else {
			jtext_printf(t, "%c", ch);
		}
	}
	jtext_printf(t, "\"");
}
