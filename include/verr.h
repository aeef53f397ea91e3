/*
 * verr: the one error convention of the whole tree.
 *
 * Every fallible library function returns VERR_OK (0) on success or one of
 * the negative codes below. VERR_SYSTEM means "look at errno": functions
 * that return it leave errno set to the cause. Library code never prints
 * and never exits; only a program's main() turns a code into a message.
 */
#ifndef VRUN_VERR_H
#define VRUN_VERR_H

enum verr {
	VERR_OK = 0,
	VERR_SYSTEM = -1,        /* errno holds the cause */
	VERR_NOMEM = -2,         /* allocation failed (also sodium_malloc) */
	VERR_INVALID = -3,       /* bad argument from the caller (a bug) */
	VERR_TOO_LARGE = -4,     /* input exceeds a fixed bound */
	VERR_CRYPTO = -5,        /* libsodium/OpenSSL primitive failed */
	VERR_NO_HOME = -6,       /* cannot work out where the vault lives */
	VERR_INSECURE_PATH = -7, /* symlink, foreign owner or loose mode */
	VERR_NO_TTY = -8,        /* a terminal was needed and there is none */
	VERR_PASSPHRASE_EMPTY = -9,
	VERR_PASSPHRASE_MISMATCH = -10,
	VERR_PASSPHRASE_FILE = -11, /* VAULT_PASSPHRASE_FILE unusable */
	VERR_VAULT_MISSING = -12,   /* no vault.db yet */
	VERR_VAULT_EXISTS = -13,    /* vault init over an existing vault */
	VERR_VAULT_FORMAT = -14,    /* not a vault, or unknown version */
	VERR_VAULT_KDF = -15,       /* KDF parameters out of bounds */
	VERR_VAULT_DECRYPT = -16,   /* wrong passphrase or damaged file */
	VERR_VAULT_CORRUPT = -17,   /* authenticated, but contents malformed */
	VERR_VAULT_READONLY = -18,  /* vault opened without the write lock */
	VERR_KEY_NAME = -19,        /* key name outside the allowed charset */
	VERR_KEY_EXISTS = -20,
	VERR_KEY_UNKNOWN = -21,
	VERR_KEY_AMBIGUOUS = -22,
	VERR_SECRET_EMPTY = -23,
	VERR_SECRET_BYTES = -24, /* CR, LF or NUL in a secret */
	VERR_HOST = -25,         /* malformed HOST[:PORT] */
	VERR_HOST_PORT = -26,    /* port not in 1..65535, or not canonical */
	VERR_HOST_WILDCARD = -27,
	VERR_INJECT = -28,              /* malformed --inject mode */
	VERR_ENV_NAME = -29,            /* malformed placeholder variable name */
	VERR_ENV_RESERVED = -30,        /* variable that vrun itself controls */
	VERR_ENV_TAKEN = -31,           /* another key already uses the variable */
	VERR_CA_BUNDLE = -32,           /* --ca file holds no valid certificate */
	VERR_TOO_MANY = -33,            /* too many keys or hosts */
	VERR_CTL = -34,                 /* malformed control message */
	VERR_CTL_EOF = -35,             /* control peer closed the connection */
	VERR_VAULT_REKEYED = -36,       /* passphrase changed under a running daemon */
	VERR_DAEMON_RUNNING = -37,      /* another vproxy is running for this VAULT_HOME */
	VERR_DAEMON_DOWN = -38,         /* no vproxy answers on the control socket */
	VERR_LISTENER = -39,            /* descriptor passed is not a listening TCP socket */
	VERR_SESSION_LIMIT = -40,       /* too many sessions */
	VERR_CERT_UNBOUND = -41,        /* no leaf: host not bound to the session */
	VERR_CERT_EXPIRED = -42,        /* the session CA is past its notAfter */
	VERR_INJECT_CONFLICT = -43,     /* two keys set the same header or parameter */
	VERR_INJECT_SECRET_BYTES = -44, /* secret has bytes a header value cannot carry */
	VERR_PROFILE_NOT_FOUND = -45,   /* no such sandbox profile, or a bad profile name */
	VERR_PROFILE_SYNTAX = -46,      /* profile text malformed; the message names file:line */
	VERR_SBPL_STRING = -47,         /* a path cannot be written into a Seatbelt profile */
	VERR_AUDIT_DAMAGED = -48,       /* audit log ends in unreadable data */
	VERR_AUDIT_TAMPERED = -49,      /* audit log verification failed */
	VERR_SANDBOX = -50,             /* the sandbox could not be set up */
	VERR_NO_USERNS = -51,           /* user namespaces unavailable to this user */
	VERR_CMD_NOT_FOUND = -52,       /* the command to run does not exist */
	VERR_CMD_NOT_EXEC = -53,        /* the command exists but cannot be executed */
	VERR_DAEMON_ORPHANED = -54,     /* vproxy's control socket was removed under it */
	VERR_PASTE_LINES = -55,         /* several lines pasted at a one-line prompt */
	VERR_LIMIT_LAST = -56
};

/* A static, human-readable description of code; never NULL. */
const char *verr_strerror(int code);

#endif
