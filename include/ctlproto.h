/*
 * ctlproto: the control protocol between vrun (and `vproxy stop|status`)
 * and the vproxy daemon, over a unix stream socket.
 *
 * A message is an 8-byte header followed by a payload of fields:
 *
 *   u16 version (CTL_VERSION) | u16 type | u32 payload length (<= CTL_MAX_PAYLOAD)
 *   field: u16 tag | u32 length | bytes
 *
 * Integers are big-endian. Text fields hold no NUL byte. Each message type
 * lists the tags it accepts (ctl_parse checks them); anything else, a
 * wrong version, a short or oversized message, is VERR_CTL and the peer
 * is dropped. File descriptors travel as SCM_RIGHTS with the message that
 * needs them (CTL_OPEN carries the session listener).
 */
#ifndef VRUN_CTLPROTO_H
#define VRUN_CTLPROTO_H

#include <stddef.h>
#include <stdint.h>

#define CTL_VERSION     1
#define CTL_HEADER_LEN  8
#define CTL_MAX_PAYLOAD (64 * 1024)
#define CTL_MAX_FIELDS  256
#define CTL_MAX_KEYS    16

enum ctl_type {
	CTL_OPEN = 1,         /* client: open a session (+ listener fd) */
	CTL_OPENED = 2,       /* daemon: session id, CA bundle, keys */
	CTL_ERROR = 3,        /* daemon: code + message */
	CTL_CLOSE = 4,        /* client: the command ended (exit status) */
	CTL_STATUS = 5,       /* client: what is running? */
	CTL_STATUS_REPLY = 6, /* daemon: pid, uptime, keys, sessions */
	CTL_STOP = 7,         /* client: shut the daemon down */
	CTL_OK = 8,           /* daemon: done */
};

enum ctl_tag {
	CTL_T_KEY = 1,         /* OPEN: a key name as typed (exact or prefix) */
	CTL_T_ALLOW_HOST = 2,  /* OPEN: HOST[:PORT] tunnelled without interception */
	CTL_T_ARG = 3,         /* OPEN: one argv element of the command (audit) */
	CTL_T_CWD = 4,         /* OPEN: working directory (audit) */
	CTL_T_PID = 5,         /* OPEN: u64 pid of vrun; STATUS_REPLY: daemon pid */
	CTL_T_PROFILE = 6,     /* OPEN: profile name (audit) */
	CTL_T_SESSION = 7,     /* OPENED: session id (text) */
	CTL_T_CA_PATH = 8,     /* OPENED: CA bundle path for the child */
	CTL_T_KEYINFO = 9,     /* OPENED: "name\tENV\tplaceholder"; STATUS_REPLY: key name */
	CTL_T_CODE = 10,       /* ERROR: i64 VERR_* code */
	CTL_T_MESSAGE = 11,    /* ERROR: text for the person */
	CTL_T_EXIT = 12,       /* CLOSE: i64 exit status of the command */
	CTL_T_UPTIME = 13,     /* STATUS_REPLY: u64 seconds */
	CTL_T_SESSINFO = 14,   /* STATUS_REPLY: "id\trequests\tcommand" per session */
	CTL_T_RESOLVED = 15,   /* OPENED: "typed\tresolved" when a prefix was expanded */
	CTL_T_PROXY_AUTH = 16, /* OPEN: token every client of the listener must present
	                          (macOS: the listener is reachable by any local process) */
};

struct ctl_field {
	uint16_t tag;
	uint32_t len;
	const unsigned char *data; /* points into the parsed buffer */
};

struct ctl_msg {
	uint16_t type;
	size_t nfields;
	struct ctl_field fields[CTL_MAX_FIELDS];
};

/* A message being built; fixed size so building never allocates. */
struct ctl_writer {
	size_t len;
	int err; /* first error, reported by ctl_finish */
	unsigned char buf[CTL_HEADER_LEN + CTL_MAX_PAYLOAD];
};

/*
 * Header of a message at buf (len >= CTL_HEADER_LEN). Sets *type and
 * *payload_len. 0, or VERR_CTL for a wrong version or oversized payload.
 */
int ctl_parse_header(const unsigned char *buf, size_t len, uint16_t *type, uint32_t *payload_len);

/*
 * Parse one complete message of exactly len bytes (header included) and
 * check that every tag is allowed for its type. 0 or VERR_CTL.
 */
int ctl_parse(const unsigned char *buf, size_t len, struct ctl_msg *out);

/* Field accessors: 0 or VERR_CTL (missing, wrong size, NUL in text). */
int ctl_get_u64(const struct ctl_msg *m, uint16_t tag, uint64_t *v);
int ctl_get_i64(const struct ctl_msg *m, uint16_t tag, int64_t *v);
/* Copy the text of the first field with tag into buf (NUL-terminated). */
int ctl_get_str(const struct ctl_msg *m, uint16_t tag, char *buf, size_t size);
/* The i-th field with tag, or NULL. */
const struct ctl_field *ctl_nth(const struct ctl_msg *m, uint16_t tag, size_t i);
/* Text field into buf; VERR_CTL if it holds NUL or does not fit. */
int ctl_field_str(const struct ctl_field *f, char *buf, size_t size);

void ctl_begin(struct ctl_writer *w, uint16_t type);
void ctl_add(struct ctl_writer *w, uint16_t tag, const void *data, size_t len);
void ctl_add_str(struct ctl_writer *w, uint16_t tag, const char *s);
void ctl_add_u64(struct ctl_writer *w, uint16_t tag, uint64_t v);
void ctl_add_i64(struct ctl_writer *w, uint16_t tag, int64_t v);
/* Seal the header; VERR_TOO_LARGE if a field did not fit. */
int ctl_finish(struct ctl_writer *w);

/*
 * Blocking send of a finished message, with pass_fd attached when >= 0.
 * 0 or VERR_SYSTEM.
 */
int ctl_send(int sock, const struct ctl_writer *w, int pass_fd);

/*
 * Blocking receive of one message into w->buf (w->len set) and parse it
 * into *msg. A descriptor that arrived with it is returned in *fd (else
 * -1); any extra descriptors are closed. 0, VERR_CTL, VERR_CTL_EOF or
 * VERR_SYSTEM.
 */
int ctl_recv(int sock, struct ctl_writer *w, struct ctl_msg *msg, int *fd);

#endif
