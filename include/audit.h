/*
 * audit: the tamper-evident audit log.
 *
 * JSON Lines in $VAULT_HOME/audit.log (paths.audit), mode 0600 in the 0700
 * VAULT_HOME; symlinks, foreign owners and loose modes are refused. Written
 * by one process (vproxy, which holds the runtime lock), read by `vault
 * audit`. Never a secret and never a placeholder in a record: callers pass
 * names, and request paths lose their query values (audit_redact_path).
 *
 * Record: one JSON object per line, compact, members in this order:
 *
 *   {"v":1,"seq":N,"time":"2026-11-29T10:00:00.123Z","type":T,"session":S,
 *    <the type's fields, in the caller's order>,
 *    "prev":"<64 hex>","hmac":"<64 hex>"}
 *
 *   seq      1 for the very first record ever, then +1 per record, across
 *            rotated files.
 *   time     UTC, RFC 3339, milliseconds.
 *   type     "session_start", "request" or "session_end".
 *   prev     lowercase hex SHA-256 of the previous record's line (all its
 *            bytes, without the newline; the previous line may be in the
 *            next older file). 64 '0's for seq 1.
 *   hmac     lowercase hex HMAC-SHA256, keyed with the vault's audit key
 *            (vault_audit_key), over the line with its hmac member cut out.
 *
 * Byte rule (what writer and verifier both hash; no JSON re-serialisation):
 * a line L (without "\n") must end with the 75 bytes
 *     ,"hmac":"<64 lowercase hex>"}
 * and the HMAC input is L without those 75 bytes, followed by the single byte
 * "}". That input itself ends with  "prev":"<64 lowercase hex>"} .
 * Strings are UTF-8, not \u-escaped beyond what JSON requires; control
 * characters are escaped, so a record never spans lines.
 *
 * Rotation: when a record would take audit.log past the size limit, audit.log
 * becomes audit.log.1, audit.log.1 becomes .2, ... keeping at most
 * AUDIT_KEEP rotated files (the oldest is deleted), and the chain continues in
 * a fresh audit.log (seq and prev carry on).
 *
 * What verification proves, and what it cannot:
 * - any edited byte, removed hmac, deleted, reordered, duplicated or inserted
 *   record, a record made without the key, a cut or unterminated line, and a
 *   rotated file deleted from the middle are reported with file and line;
 * - the first record must be seq 1 with an all-zero prev, unless it is in
 *   path.AUDIT_KEEP (then rotation may have deleted older files): in that
 *   case its prev cannot be checked against anything, so records cut from
 *   the old end (lines from the start of that file, or whole oldest files
 *   with the rest renamed up) go unnoticed; res->start_unchecked says so;
 * - removing the newest records (cutting whole lines off the end, or deleting
 *   every file) leaves a shorter chain that is still intact: without an
 *   anchor kept elsewhere no log can prove its own end.
 *
 * Every function returns 0 or a negative VERR_* code and clears its output
 * parameters on entry, unless said otherwise. Not thread-safe: one struct
 * audit is used from one thread.
 */
#ifndef VRUN_AUDIT_H
#define VRUN_AUDIT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "secbuf.h"

#define AUDIT_VERSION        1
#define AUDIT_KEEP           9                     /* rotated files kept: audit.log.1 .. .9 */
#define AUDIT_ROTATE_DEFAULT (64ull * 1024 * 1024) /* bytes */
#define AUDIT_LINE_MAX       (64 * 1024)           /* longest record line, without "\n" */
#define AUDIT_FIELD_MAX      2048 /* the typed writers cut longer strings ("...") */
#define AUDIT_HASH_HEX       64

/* ---- writing (vproxy) ---- */

struct audit;

/*
 * Open (creating, mode 0600) the log at path, normally paths.audit, whose
 * directory must already be private. The key (VAULT_AUDIT_KEY_LEN bytes) is
 * copied into secret memory. The chain continues from the last complete
 * record of path, or of path.1 when path is empty or missing; nothing else is
 * read or verified. An unterminated last line (a crash mid-write) is left for
 * `verify` to report and the next record starts on a fresh line.
 * VERR_INSECURE_PATH, VERR_AUDIT_DAMAGED (no record found in the last
 * AUDIT_LINE_MAX bytes of a non-empty log), VERR_SYSTEM, ...
 */
int audit_open(const char *path, const struct secbuf *key, struct audit **out);

/* Rotate when a record would take the file past max_bytes (0: never). */
void audit_set_rotate(struct audit *a, uint64_t max_bytes);

/* With on, fdatasync after every record (and fsync the directory on rotation). */
void audit_set_sync(struct audit *a, int on);

/*
 * Append one record: the common members, then fields' members in their
 * order, then prev and hmac. type is "session_start", "request" or
 * "session_end"; session a non-empty UTF-8 id; fields an object (borrowed,
 * not stolen; NULL for none) that must not use the names v, seq, time, type,
 * session, prev or hmac (VERR_INVALID). The line goes out in one write(2) on
 * an O_APPEND descriptor. Returns 0 only when the whole line was written (and
 * synced, with audit_set_sync); otherwise VERR_SYSTEM with errno (ENOSPC,
 * EFBIG, EIO, EBADF, ...; a short write is undone with ftruncate when
 * possible), VERR_TOO_LARGE beyond AUDIT_LINE_MAX, ... The chain does not
 * advance on failure, so the caller may refuse the request (503) and go on.
 */
int audit_append(struct audit *a, const char *type, const char *session, json_t *fields);

/*
 * Whether a record can be expected to be written now: 0, or VERR_SYSTEM with
 * errno when the last write failed (until one succeeds again) or the file is
 * closed. Keeps space allocated ahead of the end of the file (fallocate,
 * beyond the file's size) and fails with ENOSPC when none can be had, so that
 * a full disk is noticed here rather than when a finished request's record
 * is due. vproxy asks before it forwards anything: a request whose record
 * could not follow is refused (503) instead.
 */
int audit_ready(struct audit *a);

/* The seq of the last record written or found at open; 0 for an empty log. */
uint64_t audit_last_seq(const struct audit *a);

/* Close the file and wipe the key; NULL is fine. */
void audit_close(struct audit *a);

/*
 * Typed writers for vproxy: they build the fields in schema order, turn
 * bytes that are not UTF-8 (and NULs) into '?', and cut strings longer than
 * AUDIT_FIELD_MAX bytes. NULL strings become JSON null. Same returns as
 * audit_append.
 */
struct audit_session_start {
	pid_t pid; /* of the command (vrun) */
	uid_t uid;
	const char *command; /* argv joined for display */
	const char *cwd;
	const char *const *keys; /* key names of the session */
	size_t nkeys;
	const char *profile; /* sandbox profile name, or NULL */
	const char *const *allow_hosts;
	size_t nallow_hosts;
};
int audit_log_session_start(struct audit *a, const char *session,
                            const struct audit_session_start *s);

struct audit_request {
	const char *key;    /* name of the key involved, or NULL */
	const char *method; /* "GET", "CONNECT", ... */
	const char *host;
	unsigned port;
	const char *target; /* request-target as received (before injection); */
	size_t target_len;  /* its query values are removed here */
	int status;         /* response status sent to the client; 0 -> null */
	/*
	 * bytes_up: the request body as sent upstream (the head is left out:
	 * with the secret injected its length would say the secret's);
	 * bytes_down: the response, head and body, as sent to the client.
	 */
	uint64_t bytes_up, bytes_down, duration_ms;
	int denied;         /* decision: 0 "allowed", 1 "denied" */
	const char *reason; /* short text, e.g. "host not bound" */
	int injected;       /* a secret was put into this request */
	unsigned scrubbed;  /* secret occurrences removed from the response */
};
int audit_log_request(struct audit *a, const char *session, const struct audit_request *r);

struct audit_session_end {
	int exited;      /* 0: exit unknown (null) */
	int exit_status; /* vrun's exit status when exited */
	uint64_t requests, denied, bytes_up, bytes_down, duration_ms;
};
int audit_log_session_end(struct audit *a, const char *session, const struct audit_session_end *e);

/*
 * Copy the request-target in[0..len) to out with every query value removed:
 * "/p?a=1&b=2" -> "/p?a=&b=". A query item without '=' could itself be a
 * secret, so it is removed too ("/p?tok&a=1" -> "/p?&a="). Nothing before
 * the first '?' changes. out is always NUL-terminated (outsize >= 1);
 * VERR_TOO_LARGE when the result was cut to fit. Returns 0 or VERR_*.
 */
int audit_redact_path(const char *in, size_t len, char *out, size_t outsize);

/* ---- reading (vault audit) ---- */

/*
 * Lines of the log oldest first: path.AUDIT_KEEP .. path.1 (those that
 * exist), then path. All files are opened at once so a rotation while
 * reading changes nothing. With follow, the reader waits at the end of path
 * for more (audit_reader_next returns 0 until there is), notices a rotation
 * and goes on in the new file without losing or repeating a line.
 */
struct audit_reader;

enum {
	AUDIT_LINE_UNTERMINATED = 1, /* at end of file without "\n" (cut or half-written) */
	AUDIT_LINE_OVERLONG = 2,     /* longer than AUDIT_LINE_MAX; data holds the start */
};

struct audit_line {
	const char *file; /* base name: "audit.log", "audit.log.3" */
	uint64_t lineno;  /* 1-based within file */
	const char *data; /* the line without "\n", NUL-terminated (may hold NULs) */
	size_t len;
	int flags; /* AUDIT_LINE_* */
};

/* A missing directory or log is an empty log. VERR_INSECURE_PATH, ... */
int audit_reader_open(const char *path, int follow, struct audit_reader **out);

/*
 * 1 with *line filled (valid until the next call), 0 at the end (with
 * follow: nothing new yet; call again later), or VERR_*.
 */
int audit_reader_next(struct audit_reader *r, struct audit_line *line);

/* Files opened so far (rotated ones plus audit.log when present). */
unsigned audit_reader_files(const struct audit_reader *r);

void audit_reader_close(struct audit_reader *r);

/* ---- verification ---- */

enum audit_bad {
	AUDIT_OK = 0,
	AUDIT_BAD_UNTERMINATED, /* last line has no newline: cut or half-written */
	AUDIT_BAD_TOO_LONG,     /* line longer than AUDIT_LINE_MAX */
	AUDIT_BAD_FORMAT,       /* not a record: bad JSON or members */
	AUDIT_BAD_NO_HMAC,      /* valid JSON without the hmac member at the end */
	AUDIT_BAD_HMAC,         /* edited, forged or written under another key */
	AUDIT_BAD_SEQ_GAP,      /* seq skips: records deleted or moved */
	AUDIT_BAD_SEQ_BACK,     /* seq repeats or goes back: inserted, copied, moved */
	AUDIT_BAD_PREV,         /* prev is not the hash of the record before */
	AUDIT_BAD_START,        /* first record is not seq 1 and nothing was rotated away */
};

struct audit_verify_result {
	uint64_t records;    /* good records checked */
	unsigned files;      /* files read */
	uint64_t first_seq;  /* of the oldest record, 0 when none */
	uint64_t last_seq;   /* of the newest good record */
	int start_unchecked; /* the oldest record follows deleted rotated files */
	/* the first problem, when audit_verify returned VERR_AUDIT_TAMPERED: */
	int bad;         /* enum audit_bad */
	char file[32];   /* base name */
	uint64_t line;   /* 1-based within file */
	char detail[96]; /* e.g. "seq 7 where 5 was expected"; may be empty */
};

/*
 * Check every file of the log at path against key (readable, e.g.
 * vault_audit_key of an open vault). 0 when intact (an empty
 * or missing log is intact with 0 records), VERR_AUDIT_TAMPERED with
 * res->bad, file, line and detail set at the first problem, or another
 * VERR_* when the check itself could not run (VERR_INSECURE_PATH, ...).
 */
int audit_verify(const char *path, const struct secbuf *key, struct audit_verify_result *res);

/* Short description of an enum audit_bad value; never NULL. */
const char *audit_bad_str(int bad);

/*
 * Parse an RFC 3339 timestamp ("2026-11-29T10:00:00Z", optional fraction,
 * 'Z' or +HH:MM / -HH:MM, 't'/'z'/' ' accepted) into milliseconds since the
 * epoch. VERR_INVALID when malformed.
 */
int audit_parse_time(const char *s, int64_t *ms);

/* ---- for tests only ---- */

/* Use fd (which the writer now owns) in place of its descriptor. */
void audit_test_set_fd(struct audit *a, int fd);

/* Stamp records with ms since the epoch instead of the clock (0: clock). */
void audit_test_set_time(struct audit *a, int64_t ms);

/* audit_log_request's record built through jansson: must give the same bytes. */
int audit_test_log_request_json(struct audit *a, const char *session,
                                const struct audit_request *r);

#endif
