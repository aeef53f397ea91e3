/*
 * libFuzzer target: the vault plaintext decoder and header parser, i.e.
 * what an attacker who knows the passphrase-derived key (or a bug in
 * ourselves) could feed us after authentication, plus the unauthenticated
 * header. Every accepted entry must pass the same checks vault_add applies.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vaultfmt.h"
#include "verr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vaultfmt_contents c;
	struct vaultfmt_header h;
	struct secbuf *again;

	(void)vaultfmt_header_parse(data, size, &h);
	if (vaultfmt_decode(data, size, &c) != 0)
		return 0;
	for (size_t i = 0; i < c.nentries; i++)
		if (vault_check_entry(c.entries[i]) != 0)
			abort();
	/* Accepted input is canonical: it re-encodes to the same bytes. */
	if (vaultfmt_encode(&c, &again) != 0 || again->len != size ||
	    memcmp(again->data, data, size) != 0)
		abort();
	secbuf_free(again);
	vaultfmt_contents_clear(&c);
	return 0;
}
