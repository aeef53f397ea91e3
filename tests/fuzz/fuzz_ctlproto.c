/*
 * libFuzzer target: the control-protocol decoder, which parses messages
 * from any process of the same user. Accepted messages must have every
 * field inside the buffer, and the accessors must stay within bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctlproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ctl_msg m;
	static struct ctl_writer w;
	char buf[256];
	uint64_t u;

	if (ctl_parse(data, size, &m) != 0)
		return 0;
	for (size_t i = 0; i < m.nfields; i++) {
		const struct ctl_field *f = &m.fields[i];

		if (f->data < data || f->data + f->len > data + size)
			abort();
		(void)ctl_field_str(f, buf, sizeof(buf));
	}
	(void)ctl_get_u64(&m, CTL_T_PID, &u);
	(void)ctl_get_str(&m, CTL_T_CWD, buf, sizeof(buf));
	/* Re-encoding the fields gives back the same message. */
	ctl_begin(&w, m.type);
	for (size_t i = 0; i < m.nfields; i++)
		ctl_add(&w, m.fields[i].tag, m.fields[i].data, m.fields[i].len);
	if (ctl_finish(&w) != 0 || w.len != size || memcmp(w.buf, data, size) != 0)
		abort();
	return 0;
}
