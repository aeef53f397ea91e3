/*
 * audit_writer_tool: append audit records for the CLI tests, the way vproxy
 * will, with the audit key of the vault in VAULT_HOME (passphrase from
 * VAULT_PASSPHRASE_FILE).
 *
 *   audit_writer_tool [--rotate BYTES] < records
 *
 * Each input line is a JSON object {"type": T, "session": S, "fields": {...}}
 * with an optional "at": RFC 3339 time to stamp the record with. A "request"
 * whose fields hold "target" goes through audit_log_request (so its query
 * values are redacted as in vproxy); everything else through audit_append.
 * Exit 0 when every record was written, 1 otherwise.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "passphrase.h"
#include "paths.h"
#include "vault.h"
#include "verr.h"

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static uint64_t
num(json_t *o, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(o, k));
}

static int
typed_request(struct audit *a, const char *session, json_t *f)
{
	struct audit_request q = {0};
	const char *d = str(f, "decision");

	q.key = str(f, "key");
	q.method = str(f, "method");
	q.host = str(f, "host");
	q.port = (unsigned)num(f, "port");
	q.target = str(f, "target");
	q.target_len = strlen(q.target);
	q.status = (int)num(f, "status");
	q.bytes_up = num(f, "bytes_up");
	q.bytes_down = num(f, "bytes_down");
	q.duration_ms = num(f, "duration_ms");
	q.denied = d != NULL && strcmp(d, "denied") == 0;
	q.reason = str(f, "reason");
	q.injected = json_is_true(json_object_get(f, "injected"));
	q.scrubbed = (unsigned)num(f, "scrubbed");
	return audit_log_request(a, session, &q);
}

int
main(int argc, char **argv)
{
	struct paths p = {0};
	struct secbuf *pass = NULL;
	struct vault *v = NULL;
	struct audit *a = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned long lineno = 0;
	int r, ret = 1;

	if ((r = secbuf_process_setup()) != 0 || (r = paths_resolve(&p)) != 0 ||
	    (r = passphrase_get("VAULT_PASSPHRASE_FILE", "Vault passphrase: ", 0, &pass)) != 0 ||
	    (r = vault_open(&p, pass, VAULT_READ, &v)) != 0 ||
	    (r = audit_open(p.audit, vault_audit_key(v), &a)) != 0) {
		fprintf(stderr, "audit_writer_tool: %s\n",
		        r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
		goto out;
	}
	vault_close(v);
	v = NULL;
	if (argc == 3 && strcmp(argv[1], "--rotate") == 0)
		audit_set_rotate(a, strtoull(argv[2], NULL, 10));
	while ((n = getline(&line, &cap, stdin)) > 0) {
		json_t *in = json_loadb(line, (size_t)n, 0, NULL), *f;
		const char *at, *type;
		int64_t ms = 0;

		lineno++;
		if (!json_is_object(in)) {
			fprintf(stderr, "audit_writer_tool: input line %lu is not an object\n",
			        lineno);
			json_decref(in);
			goto out;
		}
		if ((at = str(in, "at")) != NULL && audit_parse_time(at, &ms) != 0) {
			fprintf(stderr, "audit_writer_tool: input line %lu: bad time\n", lineno);
			json_decref(in);
			goto out;
		}
		audit_test_set_time(a, ms);
		f = json_object_get(in, "fields");
		type = str(in, "type");
		if (type != NULL && strcmp(type, "request") == 0 && str(f, "target") != NULL)
			r = typed_request(a, str(in, "session"), f);
		else
			r = audit_append(a, type, str(in, "session"), f);
		json_decref(in);
		if (r != 0) {
			fprintf(stderr, "audit_writer_tool: input line %lu: %s\n", lineno,
			        r == VERR_SYSTEM ? strerror(errno) : verr_strerror(r));
			goto out;
		}
	}
	ret = 0;
out:
	free(line);
	audit_close(a);
	vault_close(v);
	secbuf_free(pass);
	paths_clear(&p);
	return ret;
}
