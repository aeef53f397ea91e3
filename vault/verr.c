#include "verr.h"

const char *
verr_strerror(int code)
{
	switch (code) {
	case VERR_OK:
		return "success";
	case VERR_SYSTEM:
		return "system error";
	case VERR_NOMEM:
		return "out of memory";
	case VERR_INVALID:
		return "invalid argument";
	case VERR_TOO_LARGE:
		return "input too large";
	case VERR_CRYPTO:
		return "cryptographic operation failed";
	case VERR_NO_HOME:
		return "cannot locate the vault: set VAULT_HOME to an absolute path, or HOME";
	case VERR_INSECURE_PATH:
		return "refusing insecure path: it must be owned by you, not a symlink, and "
		       "not accessible by group or others (chmod go-rwx)";
	case VERR_NO_TTY:
		return "no terminal to ask on: run from a terminal, or set VAULT_PASSPHRASE_FILE "
		       "(VAULT_NEW_PASSPHRASE_FILE for a new passphrase)";
	case VERR_PASSPHRASE_EMPTY:
		return "empty passphrase refused";
	case VERR_PASSPHRASE_MISMATCH:
		return "passphrases do not match";
	case VERR_PASSPHRASE_FILE:
		return "cannot use the passphrase file: it must be readable, not accessible by "
		       "group or "
		       "others (chmod 600), and hold the passphrase on its first line";
	case VERR_VAULT_MISSING:
		return "no vault yet: create one with `vault init`";
	case VERR_VAULT_EXISTS:
		return "a vault already exists here (remove vault.db yourself to start over)";
	case VERR_VAULT_FORMAT:
		return "cannot decrypt vault: not a vrun vault file, truncated, or an unsupported "
		       "version";
	case VERR_VAULT_KDF:
		return "cannot decrypt vault: key derivation parameters out of bounds (damaged "
		       "file?)";
	case VERR_VAULT_DECRYPT:
		return "cannot decrypt vault: wrong passphrase or damaged file";
	case VERR_VAULT_CORRUPT:
		return "vault contents are malformed although authenticated (written by a newer "
		       "version?)";
	case VERR_VAULT_READONLY:
		return "vault opened read-only";
	case VERR_KEY_NAME:
		return "invalid key name: 1-64 characters, a letter first, then letters, digits, "
		       "'.', '_' "
		       "or '-'";
	case VERR_KEY_EXISTS:
		return "a key with that name exists: remove it first with `vault rm NAME`";
	case VERR_KEY_UNKNOWN:
		return "no such key (see `vault list`)";
	case VERR_KEY_AMBIGUOUS:
		return "ambiguous key name: it is a prefix of several keys";
	case VERR_SECRET_EMPTY:
		return "empty secret refused";
	case VERR_SECRET_BYTES:
		return "secret refused: it contains a CR, LF or NUL byte";
	case VERR_HOST:
		return "invalid host: expected HOST[:PORT] with a DNS name, an IPv4 address or a "
		       "[bracketed] IPv6 address";
	case VERR_HOST_PORT:
		return "invalid port: expected a decimal number from 1 to 65535 without leading "
		       "zeros";
	case VERR_HOST_WILDCARD:
		return "invalid wildcard: only a leading '*.' followed by at least two labels "
		       "(*.example.com) is allowed";
	case VERR_INJECT:
		return "invalid --inject: expected placeholder, bearer, basic:USER, header:NAME or "
		       "query:PARAM";
	case VERR_ENV_NAME:
		return "invalid variable name: letters, digits and '_', not starting with a digit";
	case VERR_ENV_RESERVED:
		return "variable reserved: vrun sets it itself (proxy, CA, loader or PATH "
		       "variables); "
		       "choose another with --env";
	case VERR_ENV_TAKEN:
		return "another key already uses that variable: choose another with --env";
	case VERR_CA_BUNDLE:
		return "invalid CA bundle: expected a PEM file holding one or more certificates";
	case VERR_TOO_MANY:
		return "too many entries";
	case VERR_CTL:
		return "malformed control message (vrun and vproxy versions differ?)";
	case VERR_CTL_EOF:
		return "the control connection closed";
	case VERR_VAULT_REKEYED:
		return "the vault passphrase was changed since vproxy started: restart it with "
		       "`vproxy stop; vproxy start`";
	case VERR_DAEMON_RUNNING:
		return "vproxy is already running for this VAULT_HOME (see `vproxy status`)";
	case VERR_DAEMON_DOWN:
		return "vproxy is not running: start it with `vproxy start`";
	case VERR_LISTENER:
		return "the session listener passed is not a listening TCP socket on loopback";
	case VERR_SESSION_LIMIT:
		return "too many live sessions in vproxy";
	case VERR_CERT_UNBOUND:
		return "no certificate for this host: it is not bound to any key of the session";
	case VERR_CERT_EXPIRED:
		return "the session certificate authority has expired: start a new session";
	case VERR_INJECT_CONFLICT:
		return "request refused: two keys bound to this host would set the same header or "
		       "query parameter; bind them to different hosts or use placeholder injection";
	case VERR_INJECT_SECRET_BYTES:
		return "request refused: the secret contains control characters, which a header "
		       "cannot carry; use basic:USER or query:PARAM injection for it";
	case VERR_PROFILE_NOT_FOUND:
		return "no such sandbox profile: give a name from the profiles directory (letters, "
		       "digits, '.', '_', '-') or a path containing '/'";
	case VERR_PROFILE_SYNTAX:
		return "malformed sandbox profile (see profiles/README.md for the format)";
	case VERR_SBPL_STRING:
		return "cannot write a path into the Seatbelt profile: it holds a control "
		       "character or is not absolute";
	case VERR_AUDIT_DAMAGED:
		return "the audit log ends in unreadable data: check it with `vault audit verify`, "
		       "then move audit.log aside to start a new one";
	case VERR_AUDIT_TAMPERED:
		return "the audit log is not intact: records were edited, removed, reordered or "
		       "forged";
	case VERR_SANDBOX:
		return "the sandbox could not be set up, so the command was not started";
	case VERR_NO_USERNS:
		return "user namespaces are not available: enable them with `sysctl -w "
		       "kernel.unprivileged_userns_clone=1` (Debian) and `sysctl -w "
		       "user.max_user_namespaces=15000`; on Ubuntu also `sysctl -w "
		       "kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile "
		       "allowing userns for vrun";
	case VERR_CMD_NOT_FOUND:
		return "command not found";
	case VERR_CMD_NOT_EXEC:
		return "command cannot be executed";
	case VERR_PASTE_LINES:
		return "several lines were pasted: enter one line (nothing was kept)";
	case VERR_DAEMON_ORPHANED:
		return "the control socket was removed (its runtime directory deleted, as at "
		       "logout): nothing could reach this vproxy any more";
	}
	return "unknown error";
}
