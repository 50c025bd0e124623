/*
 * fuzz_config.c - the node's config file parser.
 *
 * The input is the text of a config file, parsed with config_parse() the
 * way config_load() parses a file's contents. A refusal must come with one
 * sentence naming the file; an accepted config stays within the documented
 * limits and survives config_to_json(): parsing that JSON again gives the
 * same JSON, so what `tern node --print-config` shows is what the node runs.
 */
#include <stdbool.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define NAME "fuzz.json"

static void
check_limits(const node_config *nc)
{
	FUZZ_CHECK(nc->listen_count <= CONFIG_MAX_ENDPOINTS);
	FUZZ_CHECK(nc->connect_count <= CONFIG_MAX_ENDPOINTS);
	FUZZ_CHECK(nc->id == NULL || strlen(nc->id) <= CONFIG_MAX_ID_LEN);
	for (size_t i = 0; i < nc->listen_count; i++) {
		FUZZ_CHECK(config_endpoint_check(nc->listen[i], NULL, 0) == 0);
	}
	for (size_t i = 0; i < nc->connect_count; i++) {
		FUZZ_CHECK(config_endpoint_check(nc->connect[i], NULL, 0) == 0);
	}
	FUZZ_CHECK(nc->tern.reconnect_initial_ms <= nc->tern.reconnect_max_ms);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	node_config nc, again;
	char err[CONFIG_ERR_LEN];
	char *json, *json2;
	int rc;

	if (size > CONFIG_MAX_FILE_BYTES) {
		return 0; /* config_load() refuses such a file before parsing */
	}
	config_init(&nc);
	err[0] = '\0';
	rc = config_parse(&nc, (const char *)data, size, NAME, err, sizeof(err));
	if (rc != 0) {
		FUZZ_CHECK(rc < 0);
		FUZZ_CHECK(strncmp(err, NAME, strlen(NAME)) == 0);
		FUZZ_CHECK(memchr(err, '\n', strlen(err)) == NULL);
		config_free(&nc);
		return 0;
	}
	check_limits(&nc);
	json = config_to_json(&nc);
	FUZZ_CHECK(json != NULL);

	config_init(&again);
	rc = config_parse(&again, json, strlen(json), NAME, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "printed config refused: %s\n%s\n", err, json);
	}
	FUZZ_CHECK(rc == 0);
	json2 = config_to_json(&again);
	FUZZ_CHECK(json2 != NULL);
	if (strcmp(json, json2) != 0) {
		fprintf(stderr, "first:\n%s\nsecond:\n%s\n", json, json2);
	}
	FUZZ_CHECK(strcmp(json, json2) == 0);
	free(json);
	free(json2);
	config_free(&again);
	config_free(&nc);
	return 0;
}
