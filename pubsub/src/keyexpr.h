/*
 * keyexpr.h - keys and key expressions (pure functions, no I/O).
 *
 * A key is '/'-separated non-empty chunks. A key expression may also use
 * "*" (exactly one chunk) and "**" (zero or more chunks) as whole chunks.
 */
#ifndef TERN_KEYEXPR_H
#define TERN_KEYEXPR_H

#include <stdbool.h>
#include <stddef.h>

#define TERN_KEY_MAX_LEN    1024
#define TERN_KEY_MAX_CHUNKS 64

/* Validate (key or expression, of len bytes); 0 or TERN_EKEY with a sentence. */
int tern__key_check(const char *s, size_t len, bool allow_wildcards);
/* The same; on a fault *at is the byte offset in s where it lies. */
int tern__key_check_at(const char *s, size_t len, bool allow_wildcards, size_t *at);

bool tern__keyexpr_match(const char *ke, size_t ke_len, const char *key, size_t key_len);
bool tern__keyexpr_intersect(const char *a, size_t a_len, const char *b, size_t b_len);
/* Every key b matches, a matches too (both validated). */
bool tern__keyexpr_includes(const char *a, size_t a_len, const char *b, size_t b_len);

#endif
