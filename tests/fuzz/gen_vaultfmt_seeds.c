/*
 * Writes valid vault plaintexts (vaultfmt_encode) into a directory, as
 * seeds for fuzz_vaultfmt: without them the fuzzer spends its time
 * rediscovering the framing before it reaches the entry checks. Every
 * inject mode, several hosts, wildcard and IP hosts, allow_http, and 0 to
 * 4 entries. The secrets are made up; no CA bundle (certificates are never
 * committed, and these seeds are generated at build time anyway).
 *
 * usage: gen_vaultfmt_seeds DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostspec.h"
#include "secbuf.h"
#include "vault.h"
#include "vaultfmt.h"

static const struct {
	const char *name, *secret, *hosts, *inject, *env;
	int allow_http;
} specs[] = {
        {"deploy-key", "sk_live_0123456789abcdef", "api.example.com", "bearer", "DEPLOY_KEY", 0},
        {"gh", "ghp_fuzzseed", "*.github.com:8443 api.github.com", "basic:x-access-token", "GH", 0},
        {"q", "qqq-token", "127.0.0.1:8080", "query:api_key", "Q_TOKEN", 1},
        {"hdr", "h-secret", "[::1]:9000 hdr.test:443", "header:X-Api-Key", "HDR", 0},
        {"ph", "placeholder-only", "ph.test", "placeholder", "PH", 0},
};

static struct vault_entry *
make_entry(size_t i)
{
	struct vault_entry *e;
	char hosts[256], *tok, *save = NULL;

	if (vault_entry_new(&e) != 0)
		return NULL;
	snprintf(e->name, sizeof(e->name), "%s", specs[i].name);
	snprintf(e->env, sizeof(e->env), "%s", specs[i].env);
	snprintf(hosts, sizeof(hosts), "%s", specs[i].hosts);
	for (tok = strtok_r(hosts, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save))
		if (e->nhosts < VAULT_HOSTS_MAX &&
		    hostspec_parse(tok, strlen(tok), HOSTSPEC_ALLOW_WILDCARD,
		                   &e->hosts[e->nhosts]) == 0)
			e->nhosts++;
	if (secbuf_dup(specs[i].secret, strlen(specs[i].secret), &e->secret) != 0 ||
	    vault_parse_inject(specs[i].inject, &e->inject, e->inject_arg, sizeof(e->inject_arg)) !=
	            0 ||
	    e->nhosts == 0) {
		vault_entry_free(e);
		return NULL;
	}
	e->allow_http = (uint8_t)specs[i].allow_http;
	e->created = 1700000000 + (int64_t)i;
	e->changed = 1700000100 + (int64_t)i;
	return e;
}

int
main(int argc, char **argv)
{
	const size_t nspecs = sizeof(specs) / sizeof(specs[0]);
	int written = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_vaultfmt_seeds DIR\n");
		return 2;
	}
	/* Seed k holds entries k, k+1, ... (k + count - 1) mod nspecs. */
	for (size_t count = 0; count <= 4; count++)
		for (size_t first = 0; first < (count == 0 ? 1 : nspecs); first++) {
			struct vaultfmt_contents c;
			struct secbuf *pt = NULL;
			char path[4096];
			FILE *f;
			int ok = 1;

			memset(&c, 0, sizeof(c));
			c.created = 1690000000;
			if (secbuf_new(VAULT_AUDIT_KEY_LEN, &c.audit_key) != 0)
				return 1;
			memset(c.audit_key->data, 0xa5, VAULT_AUDIT_KEY_LEN);
			c.audit_key->len = VAULT_AUDIT_KEY_LEN;
			if (count > 0 && (c.entries = calloc(count, sizeof(*c.entries))) == NULL)
				return 1;
			for (size_t k = 0; k < count && ok; k++) {
				c.entries[k] = make_entry((first + k) % nspecs);
				ok = c.entries[k] != NULL;
				c.nentries += ok;
			}
			if (!ok || vaultfmt_encode(&c, &pt) != 0) {
				fprintf(stderr, "gen_vaultfmt_seeds: cannot build seed %zu/%zu\n",
				        count, first);
				return 1;
			}
			snprintf(path, sizeof(path), "%s/seed-%zu-%zu", argv[1], count, first);
			if ((f = fopen(path, "wb")) == NULL ||
			    fwrite(pt->data, 1, pt->len, f) != pt->len || fclose(f) != 0) {
				perror(path);
				return 1;
			}
			written++;
			secbuf_free(pt);
			vaultfmt_contents_clear(&c);
		}
	printf("%d seeds in %s\n", written, argv[1]);
	return 0;
}
