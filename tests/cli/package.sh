#!/usr/bin/env bash
# package.sh — `cpack -G DEB` on this build tree makes a .deb with the
# programs, profiles, man pages, completion and systemd unit under /usr and
# the Debian 12 library dependencies; every dependency is an installed
# package here. Unpacked with `dpkg -x` into a temporary root (nothing is
# installed on this machine), its binaries run: --version and --help, vrun
# finds its profiles next to itself (/usr/share/vrun/profiles of that root,
# not the path configured at build time), and a whole day works with the
# unpacked binaries alone: vault init and add, vproxy start, a command under
# vrun that sees only the placeholder, vrun --check, vault audit.
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"
need cpack dpkg-deb dpkg-query groff

BUILD=${VRUN_BUILD_DIR:?set VRUN_BUILD_DIR to the build tree}
unset VRUN_PROFILE_DIR # the package must find its own

runp cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$T/pkg"
expect_rc 0 "cpack -G DEB"
DEB=$(ls "$T"/pkg/vrun_*.deb 2>/dev/null | head -1)
check "one .deb was made: $(basename "${DEB:-none}")" test -f "$DEB"
[ -f "$DEB" ] || finish

dpkg-deb -f "$DEB" Package Version Architecture Depends >"$T/control"
sed 's/^/#   /' "$T/control"
check "Package: vrun" grep -qx "Package: vrun" "$T/control"
for dep in libc6 libsodium23 libssl3 libevent-core-2.1-7 libevent-openssl-2.1-7 libjansson4 libseccomp2; do
	check "Depends names $dep" grep -qE "^Depends:.*\b$dep\b" "$T/control"
done
# Installable here: every dependency is an installed package.
missing=""
for dep in $(sed -n 's/^Depends: //p' "$T/control" | tr ',' '\n' | sed 's/(.*//; s/ //g'); do
	dpkg-query -W -f='${Status}\n' "$dep" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $dep"
done
check "every dependency is installed on this machine${missing:+ (missing:$missing)}" test -z "$missing"

dpkg-deb -c "$DEB" | awk '{print $NF}' | sed 's#^\./#/#' >"$T/files"
for f in /usr/bin/vault /usr/bin/vproxy /usr/bin/vrun /usr/share/vrun/profiles/agent \
	/usr/share/vrun/profiles/strict /usr/share/man/man1/vault.1 /usr/share/man/man1/vproxy.1 \
	/usr/share/man/man1/vrun.1 /usr/share/man/man5/vrun-profile.5 \
	/usr/share/bash-completion/completions/vault /usr/share/bash-completion/completions/vproxy \
	/usr/share/bash-completion/completions/vrun /usr/lib/systemd/user/vproxy.service; do
	check "the package holds $f" grep -qxF "$f" "$T/files"
done

ROOT="$T/root"
runp dpkg -x "$DEB" "$ROOT"
expect_rc 0 "dpkg -x"
U="$ROOT/usr"
check "the unit runs /usr/bin/vproxy" grep -qx "ExecStart=/usr/bin/vproxy start --foreground" "$U/lib/systemd/user/vproxy.service"
for page in man1/vault.1 man1/vproxy.1 man1/vrun.1 man5/vrun-profile.5; do
	groff -man -Tutf8 -ww -z "$U/share/man/$page" >"$T/out" 2>"$T/err"
	RC=$?
	LAST_CMD="groff $page"
	expect_no_err "the packaged $page renders"
done
bash --norc --noprofile -c '. "$1"' bash "$U/share/bash-completion/completions/vrun" >"$T/out" 2>"$T/err"
expect_no_err "the packaged completion loads"

for prog in vault vproxy vrun; do
	runp "$U/bin/$prog" --version
	expect_rc 0 "unpacked $prog --version"
	check "unpacked $prog --version says $prog X.Y.Z" grep -qE "^$prog [0-9]+\.[0-9]+\.[0-9]+$" "$T/out"
	runp "$U/bin/$prog" --help
	expect_rc 0 "unpacked $prog --help"
	expect_out "usage: $prog" "unpacked $prog --help"
done

# ---- a day with the unpacked binaries ----

V="$U/bin/vault" P="$U/bin/vproxy" R="$U/bin/vrun"
runp "$V" init --kdf interactive
expect_rc 0 "unpacked vault init"
printf '%s' "$SECRET" >"$T/secret"
LAST_CMD="vault add"
"$V" add deploy-key --host api.example.test <"$T/secret" >"$T/out" 2>"$T/err"
RC=$?
expect_rc 0 "unpacked vault add"
runp "$R" -k deploy -- true
expect_rc 125 "unpacked vrun without vproxy"
expect_err "vproxy is not running" "unpacked vrun found its profile, then missed vproxy"
runp "$P" start
expect_rc 0 "unpacked vproxy start"
runp "$R" -k deploy -- sh -c 'echo "key=$DEPLOY_KEY"'
expect_rc 0 "unpacked vrun runs a command"
expect_out "key=" "the command sees its variable"
expect_not "$SECRET" "$T/out" "the command sees the placeholder, not the secret"
runp "$R" --check
expect_rc 0 "unpacked vrun --check"
REAL_ROOT=$(readlink -f "$ROOT")
expect_out "ok   profile: agent ($REAL_ROOT/usr/share/vrun/profiles/agent" "vrun found the profiles of its own installation"
expect_out "all checks passed" "unpacked vrun --check"
runp "$V" audit --summary
expect_rc 0 "unpacked vault audit --summary"
expect_out "sh -c echo" "the audit shows the command"
runp "$P" stop
expect_rc 0 "unpacked vproxy stop"

finish
