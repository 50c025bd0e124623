/*
 * sanitized.h - TERN_TEST_SANITIZED is defined in a build under ASan or
 * TSan (gcc or clang). Such a build brings its own allocator, so a test
 * that interposes malloc skips itself there, and a heavy test may scale
 * down.
 */
#ifndef TERN_TEST_SANITIZED_H
#define TERN_TEST_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TERN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TERN_TEST_SANITIZED 1
#endif
#endif

#endif
