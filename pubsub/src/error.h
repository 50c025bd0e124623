/*
 * error.h - error codes and the per-thread error sentence.
 *
 * Every failing internal function records a sentence with tern__error()
 * before returning its code, so the caller at the top can print something a
 * user can act on ("endpoint 'tcp://x': missing port").
 */
#ifndef TERN_ERROR_H
#define TERN_ERROR_H

#include "tern/tern.h"

/* Record a sentence for tern_last_error() and return err. */
int tern__error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
