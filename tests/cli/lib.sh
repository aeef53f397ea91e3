# Shared helpers for the vault CLI tests; sourced by each *.sh here (bash).
#
# Usage in a test:  . "$(dirname "$0")/lib.sh" "$@"
# The first argument (or $VAULT_BIN) is the path of the vault binary.
#
# Every test gets a private temp dir $T (mode 0700, removed on exit), a
# VAULT_HOME inside it, no XDG_RUNTIME_DIR, and a random passphrase in a 0600
# file named by VAULT_PASSPHRASE_FILE. Commands run with stdin redirected, so
# they never see a terminal. Checks print TAP-like lines and keep going; the
# test exits 1 at `finish` if any check failed.

set -u
set -o pipefail
export LC_ALL=C

VAULT=${1:-${VAULT_BIN:-}}
if [ -z "$VAULT" ] || [ ! -x "$VAULT" ]; then
	echo "usage: $0 PATH-OF-vault-BINARY (or set VAULT_BIN)" >&2
	exit 2
fi
case $VAULT in /*) ;; *) VAULT=$PWD/$VAULT ;; esac

# Run by hand from a terminal? Start over in a new session without one, so
# no command can ever stop to prompt on /dev/tty (CI has no terminal anyway).
if [ -z "${VAULT_TEST_NO_TTY:-}" ] && (: </dev/tty) 2>/dev/null && command -v setsid >/dev/null; then
	VAULT_TEST_NO_TTY=1 exec setsid -w bash "$0" "$VAULT" </dev/null
fi

TEST_NAME=$(basename "$0" .sh)
CHECKS=0
FAILS=0

T=$(mktemp -d "${TMPDIR:-/tmp}/vault-cli-$TEST_NAME.XXXXXX") || exit 1
chmod 700 "$T"
cleanup() {
	# chown/chmod games in the tests must not stop the cleanup.
	chmod -R u+rwX "$T" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

unset XDG_RUNTIME_DIR XDG_DATA_HOME VAULT_NEW_PASSPHRASE_FILE
export VAULT_HOME="$T/home"

# A random printable string without '/', '+', '='; $1 bytes of entropy (24).
# shellcheck disable=SC2120 # the argument is optional
rand_secret() {
	head -c "${1:-24}" /dev/urandom | base64 -w0 | tr -d '/+='
}

# write_private FILE TEXT: TEXT plus a newline into FILE, mode 0600.
write_private() {
	(umask 077 && printf '%s\n' "$2" >"$1") && chmod 600 "$1"
}

PASS="pass-$(rand_secret)"
write_private "$T/pass" "$PASS"
export VAULT_PASSPHRASE_FILE="$T/pass"

# ---- reporting ----

ok() {
	CHECKS=$((CHECKS + 1))
	echo "ok $CHECKS - $*"
}

not_ok() {
	CHECKS=$((CHECKS + 1))
	FAILS=$((FAILS + 1))
	echo "not ok $CHECKS - $*"
}

# Show what the last `run` printed, for a failed check.
dump_last() {
	echo "#   command: ${LAST_CMD:-?}"
	echo "#   exit status: ${RC:-?}"
	[ -s "$T/out" ] && sed -n '1,15s/^/#   stdout: /p' "$T/out"
	[ -s "$T/err" ] && sed -n '1,15s/^/#   stderr: /p' "$T/err"
	return 0
}

# check DESC CMD...: a check that passes when CMD succeeds.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

finish() {
	if [ "$FAILS" -eq 0 ]; then
		echo "# $TEST_NAME: all $CHECKS checks passed"
		exit 0
	fi
	echo "# $TEST_NAME: $FAILS of $CHECKS checks FAILED"
	exit 1
}

# ---- running vault ----

# run ARGS...: vault with stdin from /dev/null; sets RC, $T/out, $T/err.
run() {
	run_in /dev/null "$@"
}

# run_in FILE ARGS...: vault with stdin from FILE.
run_in() {
	local input=$1
	shift
	LAST_CMD="vault $(printf '%q ' "$@")< $input"
	"$VAULT" "$@" <"$input" >"$T/out" 2>"$T/err"
	RC=$?
}

# run_secret SECRET ARGS...: vault with SECRET (no newline added) on stdin.
run_secret() {
	local s=$1
	shift
	printf '%s' "$s" >"$T/stdin"
	run_in "$T/stdin" "$@"
}

# expect_rc N DESC: the last run exited with N.
expect_rc() {
	if [ "$RC" -eq "$1" ]; then
		ok "$2 (exit $1)"
	else
		not_ok "$2: expected exit $1, got $RC"
		dump_last
	fi
}

# expect_err TEXT DESC / expect_out TEXT DESC: fixed TEXT in stderr / stdout.
expect_err() {
	if grep -qF -- "$1" "$T/err"; then
		ok "$2: stderr says '$1'"
	else
		not_ok "$2: stderr lacks '$1'"
		dump_last
	fi
}

expect_out() {
	if grep -qF -- "$1" "$T/out"; then
		ok "$2: stdout has '$1'"
	else
		not_ok "$2: stdout lacks '$1'"
		dump_last
	fi
}

expect_no_out() {
	if [ ! -s "$T/out" ]; then
		ok "$1: nothing on stdout"
	else
		not_ok "$1: unexpected stdout"
		dump_last
	fi
}

# expect_json PYEXPR DESC: stdout is JSON (bound to j) and PYEXPR is true.
expect_json() {
	if python3 -c '
import json, re, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
' "$T/out" "$1" 2>"$T/pyerr"; then
		ok "$2"
	else
		not_ok "$2: JSON check failed: $1"
		sed 's/^/#   python: /' "$T/pyerr"
		dump_last
	fi
}

# must ARGS...: a vault command that has to succeed for the test to go on.
must() {
	run "$@"
	[ "$RC" -eq 0 ] || { not_ok "setup: vault $* failed"; dump_last; }
}

must_secret() {
	local s=$1
	shift
	run_secret "$s" "$@"
	[ "$RC" -eq 0 ] || { not_ok "setup: vault $* (secret on stdin) failed"; dump_last; }
}

# init_vault: a fresh vault at the cheap KDF cost.
init_vault() {
	must init --kdf interactive
}

# ---- the vault file ----

db() {
	echo "$VAULT_HOME/vault.db"
}

# db_sum: sha256 of vault.db, or "missing".
db_sum() {
	if [ -e "$(db)" ]; then sha256sum <"$(db)" | cut -d' ' -f1; else echo missing; fi
}

# expect_db SUM DESC: vault.db still has checksum SUM and no temp file is left.
expect_db() {
	local now
	now=$(db_sum)
	if [ "$now" = "$1" ]; then
		ok "$2: vault.db unchanged"
	else
		not_ok "$2: vault.db changed ($1 -> $now)"
	fi
	expect_no_temps "$2"
}

# expect_no_temps DESC: no vault.db.tmp.* left in VAULT_HOME.
expect_no_temps() {
	local left
	left=$(find "$VAULT_HOME" -maxdepth 1 -name 'vault.db.tmp.*' 2>/dev/null | head -3)
	if [ -z "$left" ]; then
		ok "$1: no temp file left"
	else
		not_ok "$1: temp files left: $left"
	fi
}

# need TOOL...: fail (not skip) the whole test when a tool is missing.
need() {
	local t
	for t in "$@"; do
		if ! command -v "$t" >/dev/null 2>&1; then
			not_ok "required tool '$t' is not installed"
			finish
		fi
	done
}

need python3 sha256sum
