#!/usr/bin/env bash
# deb_install.sh — install the Debian package for real, use it, remove it.
#
# NOT a ctest test: it changes the machine (apt-get install / remove as
# root). .ci/run calls it on a throwaway Debian 12 machine:
#
#   VRUN_CI_INSTALL=1 tests/cli/deb_install.sh [BUILD-DIR]    # default: build
#
# It refuses to run without VRUN_CI_INSTALL=1, as non-root, or when a vrun
# package is installed already. Then it builds BUILD-DIR, makes a fresh
# package with `cpack -G DEB`, and checks that
#   - `apt-get install -y ./vrun_*.deb` installs it (dependencies from the
#     archive), and `vrun --version` is the package's version;
#   - `man -w` finds vault(1), vproxy(1), vrun(1) and vrun-profile(5),
#     compressed, and they render; the profiles, the copyright file, the
#     completion and the systemd unit are in place;
#   - a short day works with the /usr/bin programs alone and a scratch
#     VAULT_HOME: vault init and add (VAULT_PASSPHRASE_FILE), vproxy start,
#     `vrun -- printenv` shows the placeholder and not the key, vrun --check
#     passes with the installed profiles, vault audit verify says intact,
#     vproxy stop;
#   - `apt-get remove -y vrun` removes every file the package installed.
# Output is TAP-like; exit 0 when every check passed, 1 otherwise, 2 when
# refused.
set -u
set -o pipefail
export LC_ALL=C DEBIAN_FRONTEND=noninteractive

if [ "${VRUN_CI_INSTALL:-}" != 1 ]; then
	echo "deb_install.sh: refusing to run: it installs and removes the vrun package with" >&2
	echo "apt-get as root. Run it on a throwaway machine with VRUN_CI_INSTALL=1." >&2
	exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deb_install.sh: must run as root (apt-get install / remove)" >&2
	exit 2
fi
for tool in apt-get dpkg dpkg-query cmake cpack; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "deb_install.sh: $tool is missing: this is for Debian 12 with the build dependencies (./setup)" >&2
		exit 2
	fi
done
if dpkg-query -W -f='${Status}\n' vrun 2>/dev/null | grep -q "ok installed"; then
	echo "deb_install.sh: a vrun package is installed already; remove it first (apt-get remove vrun)" >&2
	exit 2
fi

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-$SRC/build}")
T=$(mktemp -d /tmp/vrun-deb-install.XXXXXX) || exit 1
chmod 755 "$T" # apt's _apt user reads the .deb from here
CHECKS=0
FAILS=0
INSTALLED=0

ok() {
	CHECKS=$((CHECKS + 1))
	echo "ok $CHECKS - $*"
}
not_ok() {
	CHECKS=$((CHECKS + 1))
	FAILS=$((FAILS + 1))
	echo "not ok $CHECKS - $*"
}
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
# run DESC CMD...: CMD must succeed; its output goes to $T/out, shown on failure.
run() {
	local desc=$1
	shift
	if "$@" </dev/null >"$T/out" 2>&1; then
		ok "$desc"
	else
		not_ok "$desc (exit $?): $*"
		sed -n '1,40s/^/#   /p' "$T/out"
	fi
}
has() {
	grep -qE -- "$1" "$T/out"
}
finish() {
	if [ "$FAILS" -eq 0 ]; then
		echo "# deb_install: all $CHECKS checks passed"
		exit 0
	fi
	echo "# deb_install: $FAILS of $CHECKS checks FAILED"
	exit 1
}
cleanup() {
	if [ -n "${VAULT_HOME:-}" ] && [ -x /usr/bin/vproxy ]; then
		/usr/bin/vproxy stop >/dev/null 2>&1
	fi
	# Never leave the package behind, whatever failed.
	if [ "$INSTALLED" = 1 ] && dpkg-query -W -f='${Status}\n' vrun 2>/dev/null | grep -q "ok installed"; then
		apt-get remove -y vrun >/dev/null 2>&1
	fi
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---- a fresh package ----

run "cmake --build $BUILD" cmake --build "$BUILD" -j "$(nproc)"
run "cpack -G DEB" cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$T/pkg"
debs=("$T"/pkg/vrun_*.deb)
DEB=${debs[0]}
check "one .deb was made: $(basename "${DEB:-none}")" test -f "$DEB"
[ -f "$DEB" ] || finish
chmod 755 "$T/pkg"
chmod 644 "$DEB"
VERSION=$(dpkg-deb -f "$DEB" Version)

# ---- install ----

if grep -qs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/*; then
	not_ok "dpkg on this machine drops man pages (path-exclude in /etc/dpkg/dpkg.cfg.d): the man checks cannot pass here"
fi
if ! command -v man >/dev/null 2>&1; then
	run "apt-get install man-db (to check the man pages)" apt-get install -y --no-install-recommends man-db
fi
INSTALLED=1
# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
run "apt-get install -y ./$(basename "$DEB")" sh -c 'cd "$1" && apt-get install -y "./$2"' sh "$T/pkg" "$(basename "$DEB")"
check "dpkg says vrun $VERSION is installed" \
	test "$(dpkg-query -W -f='${Status} ${Version}' vrun 2>/dev/null)" = "install ok installed $VERSION"
dpkg -L vrun 2>/dev/null | while read -r f; do [ -f "$f" ] && echo "$f"; done >"$T/files"
sed 's/^/#   /' "$T/files"

for prog in vault vproxy vrun; do
	run "/usr/bin/$prog --version" "/usr/bin/$prog" --version
	check "$prog --version says $prog $VERSION" has "^$prog $VERSION\$"
done
check "vrun on PATH is /usr/bin/vrun" test "$(command -v vrun)" = /usr/bin/vrun

for page in 1:vault 1:vproxy 1:vrun 5:vrun-profile; do
	sec=${page%%:*} name=${page#*:}
	run "man -w $sec $name" man -w "$sec" "$name"
	check "man -w $sec $name is /usr/share/man/man$sec/$name.$sec.gz" \
		test "$(cat "$T/out")" = "/usr/share/man/man$sec/$name.$sec.gz"
	MANWIDTH=80 man --warnings "$sec" "$name" >"$T/out" 2>"$T/err"
	check "man $sec $name renders without warnings" test ! -s "$T/err" -a -s "$T/out"
done
for f in /usr/share/vrun/profiles/agent /usr/share/vrun/profiles/strict \
	/usr/share/doc/vrun/copyright /usr/share/bash-completion/completions/vault \
	/usr/share/bash-completion/completions/vproxy /usr/share/bash-completion/completions/vrun \
	/usr/lib/systemd/user/vproxy.service; do
	check "$f is installed" test -f "$f"
done
check "the unit runs /usr/bin/vproxy" grep -qx "ExecStart=/usr/bin/vproxy start --foreground" \
	/usr/lib/systemd/user/vproxy.service

# ---- a short day with the installed programs ----

unset XDG_RUNTIME_DIR XDG_DATA_HOME VRUN_PROFILE_DIR VAULT_NEW_PASSPHRASE_FILE NO_COLOR
mkdir -m 700 "$T/day"
export VAULT_HOME="$T/day/home"
export VAULT_PASSPHRASE_FILE="$T/day/pass"
(umask 077 && head -c 18 /dev/urandom | base64 >"$VAULT_PASSPHRASE_FILE")
SECRET="sk-ci-$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
printf '%s' "$SECRET" >"$T/day/secret"

run "vault init" /usr/bin/vault init --kdf interactive
# shellcheck disable=SC2016 # $1 is the inner shell's
run "vault add demo-key" sh -c '/usr/bin/vault add demo-key --host api.example.test <"$1"' sh "$T/day/secret"
run "vproxy start" /usr/bin/vproxy start
run "vrun -- printenv DEMO_KEY" /usr/bin/vrun --key demo -- printenv DEMO_KEY
check "the command sees a placeholder: $(grep -m1 "^vrunph_" "$T/out")" has '^vrunph_[0-9a-f]+$'
check "and never the key" sh -c "! grep -qF -- '$SECRET' '$T/out'"
run "vrun --check" /usr/bin/vrun --check
check "vrun --check uses the installed profiles" has '^ok +profile: agent \(/usr/share/vrun/profiles/agent'
check "vrun --check: all checks passed" has 'all checks passed'
run "vault audit verify" /usr/bin/vault audit verify
check "the audit log is intact" has '^intact: [1-9][0-9]* records'
run "vproxy stop" /usr/bin/vproxy stop

# ---- remove ----

run "apt-get remove -y vrun" apt-get remove -y vrun
left=""
while read -r f; do
	[ -e "$f" ] && left="$left $f"
done <"$T/files"
check "every file of the package is gone${left:+ (left:$left)}" test -z "$left" -a -s "$T/files"
check "no vrun on PATH any more" sh -c '! command -v vrun >/dev/null'
check "dpkg no longer lists vrun as installed" \
	sh -c "! dpkg-query -W -f='\${Status}\n' vrun 2>/dev/null | grep -q 'ok installed'"

finish
