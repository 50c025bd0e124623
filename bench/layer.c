/*
 * layer.c - the layers this bench was built with, found by name. The zmq
 * layer is compiled only when pkg-config found libzmq (BENCH_HAVE_ZMQ).
 */
#include "layer.h"

#include <stdio.h>
#include <string.h>

static const struct layer_ops *const layers[] = {
    &layer_tcp_ops,
    &layer_tern_ops,
#ifdef BENCH_HAVE_ZMQ
    &layer_zmq_ops,
#endif
};

_Static_assert(sizeof(layers) / sizeof(layers[0]) <= LAYER_MAX, "LAYER_MAX is too small");

const struct layer_ops *
layer_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(layers) / sizeof(layers[0]); i++) {
		if (strcmp(name, layers[i]->name) == 0) {
			return layers[i];
		}
	}
	return NULL;
}

bool
layer_built_without(const char *name)
{
	return layer_find(name) == NULL && strcmp(name, "zmq") == 0;
}

const struct layer_ops *const *
layer_all(size_t *n)
{
	*n = sizeof(layers) / sizeof(layers[0]);
	return layers;
}

void
layer_key(char *buf, size_t len, uint32_t keys, uint64_t i)
{
	if (keys <= 1) {
		snprintf(buf, len, "bench/up");
	} else {
		snprintf(buf, len, "bench/up/%llu", (unsigned long long)(i % keys));
	}
}
