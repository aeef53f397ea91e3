#!/usr/bin/env bash
# package.sh — `cpack -G DEB` on this build tree makes a .deb with the
# programs, profiles, man pages, completion and systemd unit under /usr and
# the Debian 12 library dependencies; every dependency is an installed
# package here. As Debian policy asks, the man pages are gzip -9n compressed
# (no name, no time: reproducible) and /usr/share/doc/vrun/copyright is a
# plain file in the machine-readable format. `cmake --install` writes nothing
# into the build tree but CMake's install_manifest.txt, which it replaces
# rather than rewrites (so `sudo cmake --install` never blocks a later cpack
# as the user: checked with strace). Unpacked with `dpkg -x` into a temporary root (nothing is
# installed on this machine), its binaries run: --version and --help, vrun
# finds its profiles next to itself (/usr/share/vrun/profiles of that root,
# not the path configured at build time), and a whole day works with the
# unpacked binaries alone: vault init and add, vproxy start, a command under
# vrun that sees only the placeholder, vrun --check, vault audit.
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"
need cpack dpkg-deb dpkg-query groff strace gzip

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
	/usr/share/vrun/profiles/strict /usr/share/man/man1/vault.1.gz /usr/share/man/man1/vproxy.1.gz \
	/usr/share/man/man1/vrun.1.gz /usr/share/man/man5/vrun-profile.5.gz \
	/usr/share/bash-completion/completions/vault /usr/share/bash-completion/completions/vproxy \
	/usr/share/bash-completion/completions/vrun /usr/lib/systemd/user/vproxy.service \
	/usr/share/doc/vrun/copyright /usr/share/doc/vrun/README.md; do
	check "the package holds $f" grep -qxF "$f" "$T/files"
done
check "no man page is shipped uncompressed" sh -c "! grep -E '^/usr/share/man/.*\.[1-9]\$' '$T/files'"

ROOT="$T/root"
runp dpkg -x "$DEB" "$ROOT"
expect_rc 0 "dpkg -x"
U="$ROOT/usr"
check "the unit runs /usr/bin/vproxy" grep -qx "ExecStart=/usr/bin/vproxy start --foreground" "$U/lib/systemd/user/vproxy.service"
for page in man1/vault.1 man1/vproxy.1 man1/vrun.1 man5/vrun-profile.5; do
	gz="$U/share/man/$page.gz"
	check "$page.gz is intact gzip" gzip -t "$gz"
	# gzip header: FLG without FNAME (0x08), MTIME zero: what `gzip -n` writes.
	check "$page.gz has no file name or time in its header (gzip -n)" \
		python3 -c 'import sys; h = open(sys.argv[1], "rb").read(10); sys.exit(not (h[:2] == b"\x1f\x8b" and not h[3] & 8 and h[4:8] == b"\0\0\0\0"))' "$gz"
	check "$page.gz holds the page from man/" cmp -s <(gzip -dc "$gz") "$SRC/man/${page#*/}"
	gzip -dc "$gz" | groff -man -Tutf8 -ww -z >"$T/out" 2>"$T/err"
	RC=$?
	LAST_CMD="gzip -dc $page.gz | groff"
	expect_no_err "the packaged $page renders"
done
CR="$U/share/doc/vrun/copyright"
check "copyright is a plain file (not compressed, not a link)" test -f "$CR" -a ! -L "$CR"
check "copyright is in the machine-readable format" \
	grep -qx "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" "$CR"
check "copyright names the package" grep -qx "Upstream-Name: vrun" "$CR"
check "copyright has a Files: * paragraph with Copyright and License" \
	python3 -c '
import sys
paras = open(sys.argv[1]).read().split("\n\n")
ok = any(p.startswith("Files: *\n") and "\nCopyright: " in p and "\nLicense: " in p for p in paras)
sys.exit(not ok)' "$CR"
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

# ---- installing leaves the build tree alone ----

# Every file a `cmake --install` (into a scratch DESTDIR) creates, writes,
# renames or removes under the build tree. CMake's manifest is expected, but
# only removed and then created anew: a root-owned one left by an earlier
# `sudo cmake --install` must not stop the user's next install or cpack.
rm -f "$T/trace"
DESTDIR="$T/dest" strace -f -qq -o "$T/trace" \
	-e trace=open,openat,creat,rename,renameat,renameat2,mkdir,mkdirat,unlink,unlinkat,truncate,link,linkat,symlink,symlinkat \
	cmake --install "$BUILD" >"$T/out" 2>"$T/err"
RC=$?
LAST_CMD="DESTDIR=\$T/dest cmake --install $BUILD (under strace)"
expect_rc 0 "cmake --install into a DESTDIR"
check "the unit is installed into the DESTDIR" test -f "$T/dest/$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$BUILD/CMakeCache.txt")/lib/systemd/user/vproxy.service"
python3 - "$T/trace" "$(readlink -f "$BUILD")" >"$T/writes" <<'PY'
import re, sys
trace, build = sys.argv[1], sys.argv[2].rstrip("/") + "/"
for line in open(trace):
    m = re.match(r"\d+ +(\w+)\((.*)\) += (-?\d+)", line)
    if not m or int(m.group(3)) < 0:
        continue
    call, args = m.group(1), m.group(2)
    if call in ("open", "openat") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args):
        continue
    for path in re.findall(r'"([^"]*)"', args):
        if path.startswith(build):
            print(call, path[len(build):])
PY
sed 's/^/#   /' "$T/writes"
check "cmake --install writes nothing into the build tree but install_manifest.txt" \
	sh -c "! grep -v ' install_manifest.txt\$' '$T/writes'"
check "it removes the old manifest before writing a new one" \
	sh -c "grep -n . '$T/writes' | grep -m1 install_manifest.txt | grep -q unlink"

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
