/*
 * node.h - what the public API's modules (node.c, pub.c, sub.c) share:
 * the session behind a node.
 */
#ifndef TERN_NODE_H
#define TERN_NODE_H

#include "tern/tern.h"

#include "session.h"

struct session *tern__node_session(tern_node *node);

#endif
