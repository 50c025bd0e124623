/*
 * acl.h - access rules: which peer may subscribe to or publish on which
 * keys (pure functions over tern_config's rules, no I/O).
 *
 * A rule covers a connection when its peer is "*" or equals the identity
 * the connection proved (a TLS certificate's common name). A connection
 * that proved nothing (empty identity) is covered by "*" rules only: the id
 * a peer declares in its HELLO grants nothing.
 */
#ifndef TERN_ACL_H
#define TERN_ACL_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/tern.h"

enum acl_op { ACL_PUB, ACL_SUB };

/*
 * May a peer with this identity ("" for none) declare op on ke (len bytes,
 * validated)? ACL_SUB: ke is a key expression, allowed when an allow_sub
 * expression of a covering rule includes it. ACL_PUB: ke is a key, allowed
 * when an allow_pub expression matches it. True when cfg has no acl.
 */
bool acl_allows(const tern_config *cfg, const char *identity, enum acl_op op, const char *ke,
                size_t len);

/* A copy of the rules in one allocation (free() frees it all), for n > 0;
 * NULL when out of memory. */
tern_acl_rule *acl_copy(const tern_acl_rule *rules, size_t n);

#endif
