/*
 * error.c - error names and the last error sentence of each thread.
 */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"

static _Thread_local char last_error[512];

const char *
tern_strerror(int err)
{
	switch (err) {
	case TERN_OK:
		return "success";
	case TERN_EINVAL:
		return "invalid argument";
	case TERN_ENOMEM:
		return "out of memory";
	case TERN_ETIMEDOUT:
		return "timed out";
	case TERN_ECLOSED:
		return "closed";
	case TERN_EPROTO:
		return "protocol error";
	case TERN_EVERSION:
		return "protocol version mismatch";
	case TERN_EMSGSIZE:
		return "message too large";
	case TERN_EENDPOINT:
		return "bad endpoint";
	case TERN_EKEY:
		return "bad key expression";
	case TERN_ESYS:
		return "system error";
	case TERN_EAGAIN:
		return "queue full, message dropped";
	case TERN_EADDRINUSE:
		return "address in use";
	case TERN_EACCES:
		return "access denied";
	default:
		return "unknown error";
	}
}

const char *
tern_last_error(void)
{
	return last_error[0] ? last_error : "no error";
}

int
tern__error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

const char *
tern_version(void)
{
	return TERN_VERSION;
}

int
tern_protocol_version(void)
{
	return TERN_PROTOCOL_VERSION;
}
