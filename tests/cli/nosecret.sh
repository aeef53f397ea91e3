#!/usr/bin/env bash
# nosecret.sh — security invariant 1 for `vault`: no command, on any path,
# prints a secret or a passphrase. Distinctive random secrets and
# passphrases go through every command and every error path that sees them;
# none of them may appear in any captured stdout/stderr, nor in any file under
# VAULT_HOME (and vault.db must not hold the secret in plain, base64 or hex
# form). The vault process must also run with core dumps disabled.
. "$(dirname "$0")/lib.sh" "$@"
need mkfifo timeout

SECRET="SeCrEt-$(rand_secret 30)"
OTHER="OtHeR-$(rand_secret 30)"
PASS="PaSs-$(rand_secret 30)"
NEWPASS="NeWpAsS-$(rand_secret 30)"
WRONG="WrOnG-$(rand_secret 30)"
write_private "$T/pass" "$PASS"
write_private "$T/newpass" "$NEWPASS"
write_private "$T/wrong" "$WRONG"
mkdir -m 700 "$T/cap" "$T/cmd"
STEP=0

# cap RC [-i INPUT] ARGS...: run vault, keep its stdout and stderr in $T/cap;
# it must exit RC, so we know each path was really taken.
cap() {
	local want=$1 input=/dev/null rc
	shift
	if [ "$1" = -i ]; then
		input=$2
		shift 2
	fi
	STEP=$((STEP + 1))
	"$VAULT" "$@" <"$input" >"$T/cap/$STEP.out" 2>"$T/cap/$STEP.err"
	rc=$?
	echo "$rc vault $*" >"$T/cmd/$STEP"
	if [ "$rc" -ne "$want" ]; then
		not_ok "vault $* exited $rc, expected $want"
		sed 's/^/#   stderr: /' "$T/cap/$STEP.err"
	fi
}

# feed TEXT: a stdin file holding TEXT (printf format, so \n and \r work).
feed() {
	STEP_IN=$T/in.$((STEP + 1))
	# shellcheck disable=SC2059
	printf "$1" >"$STEP_IN"
}

cap 0 init --kdf interactive
feed "$SECRET\n"
cap 0 -i "$STEP_IN" add main-key --host api.example.com --inject bearer
feed "$OTHER"
cap 0 -i "$STEP_IN" add other-key --host other.example.com --inject header:X-Token
cap 0 list
cap 0 list --json
cap 0 show main-key
cap 0 show main-key --json
cap 0 rm other-key
VAULT_NEW_PASSPHRASE_FILE=$T/newpass cap 0 passwd
write_private "$T/pass" "$NEWPASS"
cap 0 list --json

# Error paths that have the secret on stdin or the passphrase at hand.
feed "$SECRET\n"
cap 1 -i "$STEP_IN" add main-key --host api.example.com
feed "$SECRET\n"
cap 2 -i "$STEP_IN" add second --host 'bad host'
feed "$SECRET"
cap 2 -i "$STEP_IN" add second --host api.example.com:0
feed "$SECRET"
cap 2 -i "$STEP_IN" add second --host api.example.com --inject basic:a:b
feed "$SECRET"
cap 1 -i "$STEP_IN" add second --host api.example.com --env MAIN_KEY
feed "$SECRET"
cap 2 -i "$STEP_IN" add second
feed "$SECRET\n\n"
cap 1 -i "$STEP_IN" add second --host api.example.com
feed "$SECRET\r\n"
cap 1 -i "$STEP_IN" add second --host api.example.com
feed "$SECRET\0tail"
cap 1 -i "$STEP_IN" add second --host api.example.com
python3 -c 'import sys; open(sys.argv[1], "w").write(sys.argv[2] * 600)' "$T/big" "$SECRET"
cap 1 -i "$T/big" add second --host api.example.com
feed "$SECRET"
VAULT_PASSPHRASE_FILE=$T/wrong cap 1 -i "$STEP_IN" add second --host api.example.com
VAULT_PASSPHRASE_FILE=$T/wrong cap 1 list
cp "$T/pass" "$T/pass644"
chmod 644 "$T/pass644"
VAULT_PASSPHRASE_FILE=$T/pass644 cap 1 list
VAULT_NEW_PASSPHRASE_FILE=$T/pass644 cap 1 passwd
cap 1 show no-such-key
cap 1 rm no-such-key
cap 0 add --help
cap 0 --help
feed "$SECRET"
cap 2 -i "$STEP_IN" frobnicate
# A good add at last, so the vault holds a second secret while we look.
feed "$SECRET-2\n"
cap 0 -i "$STEP_IN" add second --host api.example.com

check "captured the output of $STEP commands" test "$STEP" -ge 30
check "the commands did run: the last add succeeded" grep -q '^0 ' "$T/cmd/$STEP"
check "the error paths did run: 'secret refused' was said" \
	grep -qlF "contains a CR, LF or NUL" "$T"/cap/*.err

# absent LABEL TEXT PATH...: TEXT occurs in none of the files under PATHs.
absent() {
	local label=$1 text=$2 hits
	shift 2
	hits=$(grep -rlaF -- "$text" "$@" 2>/dev/null)
	if [ -z "$hits" ]; then
		ok "$label"
	else
		not_ok "$label: found in $(echo "$hits" | tr '\n' ' ')"
		for f in $hits; do
			f=$(basename "$f")
			[ -e "$T/cmd/${f%.*}" ] && sed 's/^/#   exit+command: /' "$T/cmd/${f%.*}"
		done
	fi
}

# The grep finds what is there: it sees the secret in its own stdin file.
check "self-test: the secret is found where it was put" grep -qaF -- "$SECRET" "$T/in.2"

for what in SECRET OTHER PASS NEWPASS WRONG; do
	absent "$what is in no command output" "${!what}" "$T/cap"
	absent "$what is in no file under VAULT_HOME" "${!what}" "$VAULT_HOME"
done
absent "the second secret is in no output" "$SECRET-2" "$T/cap"

# Encoded forms of the secrets in vault.db: base64 at each alignment, and hex.
for s in "$SECRET" "$OTHER" "$SECRET-2"; do
	for skip in 0 1 2; do
		b64=$(printf '%s' "${s:$skip}" | base64 -w0 | cut -c1-20)
		absent "base64 of a secret (offset $skip) not in vault.db" "$b64" "$(db)"
	done
	hex=$(printf '%s' "$s" | od -An -tx1 | tr -d ' \n')
	absent "hex of a secret not in vault.db" "$hex" "$(db)"
	absent "HEX of a secret not in vault.db" "${hex^^}" "$(db)"
done
absent "no file under VAULT_HOME holds the secret's first 12 bytes" "${SECRET:0:12}" "$VAULT_HOME"

# ---- no core dumps: RLIMIT_CORE is 0 while vault holds the vault open ----

mkfifo -m 600 "$T/fifo"
# Start it with core dumps allowed, so only vault itself can have turned them off.
ulimit -c unlimited 2>/dev/null || ulimit -c 1024 2>/dev/null
[ "$(ulimit -c)" != 0 ] || echo "# cannot allow core dumps here: the next check proves less"
"$VAULT" add waiting --host w.example.com <"$T/fifo" >/dev/null 2>"$T/wait.err" &
pid=$!
exec 3>"$T/fifo"
# vault sets the limit first thing; it then waits for the secret on the FIFO.
for _ in $(seq 1 100); do
	grep -q "Max core file size *0 *0 " "/proc/$pid/limits" 2>/dev/null && break
	sleep 0.05
done
check "vault runs with RLIMIT_CORE 0 (no core file can hold a secret)" \
	grep -q "Max core file size *0 *0 " "/proc/$pid/limits"
absent "the waiting process's environment has no secret" "$SECRET" "/proc/$pid/environ"
printf '%s' "$OTHER" >&3
exec 3>&-
wait "$pid"
RC=$?
LAST_CMD="vault add waiting (secret through a FIFO)"
expect_rc 0 "add with the secret through a FIFO"

finish
