# Helpers for the CLI tests that drive vproxy and vrun as well as vault
# (help, man, service, completion, check, package); sourced after lib.sh.
# The paths of the binaries come in VPROXY_BIN and VRUN_BIN (set by
# tests/cli/CMakeLists.txt); vproxy is stopped when the test exits.

VPROXY=${VPROXY_BIN:-}
VRUN=${VRUN_BIN:-}
if [ ! -x "$VPROXY" ] || [ ! -x "$VRUN" ]; then
	echo "set VPROXY_BIN and VRUN_BIN to the vproxy and vrun binaries" >&2
	exit 2
fi
VPROXY=$(readlink -f "$VPROXY")
VRUN=$(readlink -f "$VRUN")
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The build tree has no share/vrun/profiles next to vrun.
export VRUN_PROFILE_DIR="$SRC/profiles"
unset NO_COLOR VRUN_CHECK_SESSION

trap '"$VPROXY" stop >/dev/null 2>&1; cleanup' EXIT

# runp PROG ARGS...: any program, stdin from /dev/null; sets RC, $T/out, $T/err.
runp() {
	LAST_CMD=$(printf '%q ' "$@")
	"$@" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
}

# expect_no_err DESC: nothing on stderr.
expect_no_err() {
	if [ ! -s "$T/err" ]; then
		ok "$1: nothing on stderr"
	else
		not_ok "$1: unexpected stderr"
		dump_last
	fi
}

# expect_not TEXT FILE DESC: fixed TEXT does not occur in FILE.
expect_not() {
	if ! grep -qF -- "$1" "$2"; then
		ok "$3"
	else
		not_ok "$3: '$1' found in $2"
	fi
}

# mode FILE: its permission bits in octal (600).
mode() {
	stat -c %a "$1" 2>/dev/null || echo missing
}

# A vault with one key bound to api.example.test (no upstream is contacted).
SECRET="sk-live-$(rand_secret)"
make_vault() {
	init_vault
	must_secret "$SECRET" add deploy-key --host api.example.test
}
