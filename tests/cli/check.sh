#!/usr/bin/env bash
# check.sh — `vrun --check` and `vault doctor`. With vproxy running and user
# namespaces available every probe passes (exit 0), inside a real sandbox
# with a real, audited session that sends nothing upstream. The check fails
# (exit 1, a FAIL line naming the cause and the fix) when a protection is
# unavailable: vproxy stopped; no user namespaces (inside `unshare -Ur` with
# user.max_user_namespaces=0, the host untouched); an unknown key. The probe
# itself, run outside any sandbox, fails every containment probe: none of
# them can pass by construction. NO_COLOR is honoured on a terminal. `vault
# doctor` counts each FAIL line it shows, its own and vrun's, in its tally,
# and colours them on a terminal unless NO_COLOR is set to a non-empty value.
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"
need python3 unshare

make_vault
PATH="$(dirname "$VRUN"):$PATH" # vault doctor runs the vrun in PATH

# expect_line TAG NAME DESC: a line "TAG  NAME: ..." in stdout.
expect_line() {
	if grep -qE "^$1 +$2: " "$T/out"; then
		ok "$3: '$1 $2'"
	else
		not_ok "$3: no '$1 $2' line"
		dump_last
	fi
}

# expect_tally DESC: "vault doctor: N of M checks FAILED" where N is the
# number of FAIL lines shown and M the number of ok and FAIL lines.
expect_tally() {
	local fails oks said
	fails=$(grep -c '^FAIL ' "$T/out")
	oks=$(grep -c '^ok ' "$T/out")
	said=$(sed -n 's/^vault doctor: \([0-9]*\) of \([0-9]*\) checks FAILED.*/\1 \2/p' "$T/out")
	if [ "$said" = "$fails $((fails + oks))" ]; then
		ok "$1: the tally ($said) matches the $fails FAIL lines shown"
	else
		not_ok "$1: the tally says '${said:-nothing}', the output shows $fails FAIL and $oks ok lines"
		dump_last
	fi
}

# ---- all good ----

"$VPROXY" start </dev/null >/dev/null 2>&1
runp "$VRUN" --check
expect_rc 0 "vrun --check with vproxy running"
for probe in profile vproxy sandbox session namespaces privileges seccomp network masks \
	descriptors proxy "CA bundle" TLS "host loopback"; do
	expect_line ok "$probe" "vrun --check"
done
check "landlock: ok, or a note where the kernel lacks ABI 6" grep -qE '^(ok|note) +landlock: ' "$T/out"
check "no FAIL line" sh -c "! grep -q '^FAIL' '$T/out'"
expect_out "vrun --check: all checks passed" "vrun --check"
expect_out "deploy-key" "the session used the vault's key"
run audit --json
check "the check's session is audited as 'vrun --check'" grep -q '"command":"vrun --check"' "$T/out"
check "and it made no request" sh -c "! grep -q '\"type\":\"request\"' '$T/out'"

runp "$VRUN" --check -v
expect_rc 0 "vrun --check -v"
check "-v lists the vault directory among the hidden paths" grep -qxF "       $VAULT_HOME" "$T/out"

runp "$VRUN" --check --key nope
expect_rc 1 "vrun --check --key nope"
expect_line FAIL session "an unknown key"
expect_out "no such key" "an unknown key"

run doctor
expect_rc 0 "vault doctor"
for line in "vault home" vault "audit log" "vproxy files" "passphrase file" namespaces network; do
	expect_line ok "$line" "vault doctor"
done
expect_out "intact" "vault doctor verifies the audit chain (VAULT_PASSPHRASE_FILE is set)"
expect_out "vault doctor: all checks passed" "vault doctor"

# ---- colour: only on a terminal, never with NO_COLOR ----

# pty_colors PROG ARG...: run it on a terminal with NO_COLOR unset, empty and
# "1"; what each printed goes to $T/pty-unset, $T/pty-empty and $T/pty-1.
pty_colors() {
	python3 - "$T" "$@" <<'PY'
import os, pty, sys
outdir, argv = sys.argv[1], sys.argv[2:]
for label, nc in (("unset", None), ("empty", ""), ("1", "1")):
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    if nc is not None:
        env["NO_COLOR"] = nc
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    with open(os.path.join(outdir, "pty-" + label), "wb") as f:
        f.write(out)
PY
}
absent() { ! grep -qF -- "$1" "$2"; }
ESC=$(printf '\033[')
GREEN_OK=$(printf '\033[32mok  \033[0m')

pty_colors "$VRUN" --check
check "on a terminal, ok/FAIL are coloured" grep -qF "$ESC" "$T/pty-unset"
check "an empty NO_COLOR is no NO_COLOR (no-color.org)" grep -qF "$ESC" "$T/pty-empty"
check "with NO_COLOR, no escape sequence at all" absent "$ESC" "$T/pty-1"

# ---- no user namespaces: FAIL, how to enable them, exit 1 ----

runp unshare -Ur sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"' sh "$VRUN" --check
expect_rc 1 "vrun --check without user namespaces"
expect_line ok vproxy "without user namespaces"
expect_line FAIL namespaces "without user namespaces"
expect_out "sysctl" "the FAIL line says how to enable them"
expect_out "1 check FAILED" "without user namespaces"

# ---- vproxy stopped: FAIL, the sandbox probes still run ----

"$VPROXY" stop </dev/null >/dev/null 2>&1
runp "$VRUN" --check
expect_rc 1 "vrun --check with vproxy stopped"
expect_line FAIL vproxy "vproxy stopped"
expect_out "start it with \`vproxy start\`" "vproxy stopped"
for probe in namespaces seccomp network masks; do
	expect_line ok "$probe" "vproxy stopped, the sandbox still checked"
done
check "no session, so no proxy or TLS probe" sh -c "! grep -qE '^(ok|FAIL) +(proxy|TLS|session):' '$T/out'"
chmod 644 "$VAULT_PASSPHRASE_FILE"
LAST_CMD="vault doctor (passphrase file 0644)"
"$VAULT" doctor </dev/null >"$T/out" 2>"$T/err"
RC=$?
chmod 600 "$VAULT_PASSPHRASE_FILE"
expect_line FAIL "passphrase file" "a readable passphrase file"
run doctor
expect_rc 1 "vault doctor with vproxy stopped"
expect_out "vault doctor: 1 of" "vault doctor counts the failed containment check"
expect_tally "vault doctor with vproxy stopped"

# No vault at all: the doctor's own FAILs and vrun's, one count.
VAULT_HOME="$T/no-vault" run doctor
expect_rc 1 "vault doctor without a vault"
expect_line FAIL "vault home" "vault doctor without a vault"
expect_line FAIL vproxy "vault doctor without a vault (vrun's line, relayed)"
expect_tally "vault doctor without a vault"

# ---- vault doctor: colour only on a terminal, unless NO_COLOR is non-empty ----

pty_colors "$VAULT" doctor
for v in unset empty; do
	check "vault doctor on a terminal, NO_COLOR $v: its own lines are coloured" \
		grep -qF "$GREEN_OK vault home:" "$T/pty-$v"
	check "vault doctor on a terminal, NO_COLOR $v: vrun's lines are coloured" \
		grep -qF "$GREEN_OK namespaces:" "$T/pty-$v"
done
check "vault doctor, NO_COLOR=1: no escape sequence at all" absent "$ESC" "$T/pty-1"

# ---- the probe outside any sandbox: every containment probe fails ----

ns=""
for n in user pid net mnt ipc; do
	ns="$ns${ns:+,}$n:$(stat -L -c %i /proc/self/ns/$n)"
done
python3 - "$VRUN" "$ns" "$VAULT_HOME" >"$T/out" 2>"$T/err" <<'PY'
import os, socket, subprocess, sys
vrun, ns, home = sys.argv[1:4]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
port = s.getsockname()[1]
r = subprocess.run([vrun, "--internal-check-probe", "--ns=" + ns, "--tcp4=%d" % port,
                    "--hidden=" + home], stdin=subprocess.DEVNULL)
print("rc=%d" % r.returncode)
PY
sed 's/^/#   /' "$T/out"
for probe in namespaces privileges seccomp landlock network masks; do
	expect_line FAIL "$probe" "the probe outside a sandbox"
done
expect_out "reached the host's 127.0.0.1" "outside, the host's loopback is reached and seen"
check "the probe's exit status counts its failures (>= 6)" grep -qE '^rc=([6-9]|[1-9][0-9])$' "$T/out"

finish
