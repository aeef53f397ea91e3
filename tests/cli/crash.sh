#!/usr/bin/env bash
# crash.sh — "a crash at any point leaves the old or the new vault, never
# neither". strace kills `vault init`, `vault add`, `vault rm` and `vault
# passwd` with SIGKILL at every call of openat, write, fsync, close, rename,
# unlink, unlinkat, flock and fchmod they make. After each kill the vault must
# open to exactly the old contents or exactly the new ones (for passwd: the
# same contents under either the old or the new passphrase), and the next
# write must succeed and leave no vault.db.tmp.* behind. Each sweep must see
# both outcomes, which proves the kills landed on both sides of the rename.
# Failing writes (ENOSPC, EIO, EPERM, EXDEV injected) exit 1, keep the old
# vault and remove their temp file.
. "$(dirname "$0")/lib.sh" "$@"
need strace cmp

SYSCALLS="openat write fsync close rename unlink unlinkat flock fchmod"
# LeakSanitizer cannot stop the world under strace; leaks are not the point here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

printf '%s' "$(rand_secret)" >"$T/secret.in"

# restore DIR: VAULT_HOME becomes a copy of DIR ("none": no VAULT_HOME at all).
restore() {
	rm -rf "$VAULT_HOME"
	[ "$1" = none ] || cp -a "$1" "$VAULT_HOME"
}

# calls SYSCALL ARGS...: how often `vault ARGS < secret.in` makes SYSCALL.
calls() {
	local sc=$1
	shift
	strace -f -qq -o "$T/trace" -e trace="$sc" "$VAULT" "$@" <"$T/secret.in" >/dev/null 2>&1
	grep -cE "^([0-9]+ +)?$sc\(" "$T/trace"
}

# kill_at SYSCALL N ARGS...: run vault ARGS, SIGKILLed at the Nth SYSCALL.
# Sets KRC (137 when the kill happened).
kill_at() {
	local sc=$1 n=$2
	shift 2
	(strace -f -qq -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
		"$VAULT" "$@" <"$T/secret.in" >/dev/null 2>&1
	exit $?) 2>/dev/null # the subshell, not us, reports "Killed" (to /dev/null)
	KRC=$?
}

# norm FILE [NAME]: canonical JSON of a `list --json` output, without the
# timestamps of key NAME (a key added during the sweep gets a new time).
norm() {
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
for e in j:
    if len(sys.argv) > 2 and e["name"] == sys.argv[2]:
        del e["created"], e["changed"]
print(json.dumps(j, sort_keys=True))
' "$@"
}

# later_write LABEL: after a crash the next writer must work and clean up.
later_write() {
	run_secret "$(rand_secret)" add later-key --host later.example.com
	if [ "$RC" -ne 0 ]; then
		not_ok "$1: the next vault add failed"
		dump_last
	elif [ -n "$(find "$VAULT_HOME" -maxdepth 1 -name 'vault.db.tmp.*')" ]; then
		not_ok "$1: vault.db.tmp.* still there after the next vault add"
	else
		return 0
	fi
	return 1
}

# ---- state checks, one per operation; each sets STATE to old, new or bad ----

state_add() {
	STATE=bad
	run list --json
	if [ "$RC" -ne 0 ]; then
		not_ok "$1: the vault does not open after the crash"
		dump_last
		return
	fi
	case $(norm "$T/out" added-key) in
	"$OLD_NORM") STATE=old ;;
	"$NEW_NORM") STATE=new ;;
	*)
		not_ok "$1: vault opens to neither the old nor the new key set"
		dump_last
		return
		;;
	esac
	later_write "$1" || STATE=bad
}

state_rm() {
	STATE=bad
	run list --json
	if [ "$RC" -ne 0 ]; then
		not_ok "$1: the vault does not open after the crash"
		dump_last
		return
	fi
	if cmp -s "$T/out" "$T/old.json"; then
		STATE=old
	elif cmp -s "$T/out" "$T/rm.json"; then
		STATE=new
	else
		not_ok "$1: vault opens to neither the old nor the new key set"
		dump_last
		return
	fi
	later_write "$1" || STATE=bad
}

state_passwd() {
	STATE=bad
	run list --json
	if [ "$RC" -eq 0 ]; then
		STATE=old
	elif grep -qF "cannot decrypt" "$T/err"; then
		VAULT_PASSPHRASE_FILE=$T/newpass run list --json
		[ "$RC" -eq 0 ] && STATE=new
	fi
	if [ "$STATE" = bad ]; then
		not_ok "$1: neither the old nor the new passphrase opens the vault"
		dump_last
		return
	fi
	if ! cmp -s "$T/out" "$T/old.json"; then
		not_ok "$1: opens with the $STATE passphrase but the contents changed"
		dump_last
		STATE=bad
		return
	fi
	if [ "$STATE" = new ]; then
		VAULT_PASSPHRASE_FILE=$T/newpass later_write "$1" || STATE=bad
	else
		later_write "$1" || STATE=bad
	fi
}

state_init() {
	STATE=bad
	if [ ! -e "$(db)" ]; then
		# Nothing was created: init must simply work now.
		run init --kdf interactive
		if [ "$RC" -ne 0 ]; then
			not_ok "$1: no vault.db, and a new vault init fails"
			dump_last
			return
		fi
		STATE=old
	else
		run list --json
		if [ "$RC" -ne 0 ] || ! grep -qx '\[\]' "$T/out"; then
			not_ok "$1: a vault.db exists but does not open as an empty vault"
			dump_last
			return
		fi
		STATE=new
	fi
	later_write "$1" || STATE=bad
}

# sweep OP TEMPLATE ARGS...: kill `vault ARGS` at every call of every syscall
# in SYSCALLS, starting each time from TEMPLATE, and check with state_OP.
sweep() {
	local op=$1 tmpl=$2 sc n total old=0 new=0 bad=0 missed=0 points=0 seen=
	shift 2
	for sc in $SYSCALLS; do
		restore "$tmpl"
		total=$(calls "$sc" "$@")
		seen="$seen $sc:$total"
		for n in $(seq 1 "$total"); do
			points=$((points + 1))
			restore "$tmpl"
			kill_at "$sc" "$n" "$@"
			if [ "$KRC" -ne 137 ]; then
				not_ok "$op: no kill at $sc #$n of $total (strace exit $KRC)"
				missed=$((missed + 1))
			fi
			if [ -e "$(db)" ] && [ "$(stat -c %a "$(db)")" != 600 ]; then
				not_ok "$op: after a kill at $sc #$n vault.db has mode $(stat -c %a "$(db)")"
			fi
			"state_$op" "$op killed at $sc #$n"
			case $STATE in
			old) old=$((old + 1)) ;;
			new) new=$((new + 1)) ;;
			*) bad=$((bad + 1)) ;;
			esac
		done
	done
	echo "# vault $*: calls made:$seen"
	if [ "$bad" -eq 0 ] && [ "$missed" -eq 0 ]; then
		ok "$op: $points kill points, each left the old ($old) or the new ($new) vault"
	else
		not_ok "$op: $points kill points: $old old, $new new, $bad bad, $missed not killed"
	fi
	check "$op: some kills left the old vault" test "$old" -gt 0
	check "$op: some kills left the new vault" test "$new" -gt 0
}

# ---- templates ----

# A vault with three keys and the leftover of an earlier crash, so the
# cleanup (unlinkat) is on the path too.
init_vault
for k in alpha beta gamma; do
	must_secret "$(rand_secret)" add "$k" --host "$k.example.com"
done
head -c 200 /dev/urandom >"$VAULT_HOME/vault.db.tmp.Stale1"
chmod 600 "$VAULT_HOME/vault.db.tmp.Stale1"
cp -a "$VAULT_HOME" "$T/tmpl"
must list --json
cp "$T/out" "$T/old.json"
OLD_NORM=$(norm "$T/old.json" added-key)

check "strace sees vault's syscalls" test "$(calls openat list)" -gt 0
restore "$T/tmpl"
check "vault add renames exactly once" test "$(calls rename add added-key --host added.example.com)" -eq 1

# ---- add ----

restore "$T/tmpl"
must_secret "$(cat "$T/secret.in")" add added-key --host added.example.com --inject bearer
must list --json
NEW_NORM=$(norm "$T/out" added-key)
check "the reference add gives a different key set" test "$OLD_NORM" != "$NEW_NORM"
sweep add "$T/tmpl" add added-key --host added.example.com --inject bearer

# ---- rm ----

restore "$T/tmpl"
must rm beta
must list --json
cp "$T/out" "$T/rm.json"
sweep rm "$T/tmpl" rm beta

# ---- passwd ----

write_private "$T/newpass" "new-$(rand_secret)"
export VAULT_NEW_PASSPHRASE_FILE=$T/newpass
sweep passwd "$T/tmpl" passwd
unset VAULT_NEW_PASSPHRASE_FILE

# ---- init ----

sweep init none init --kdf interactive

# ---- failing writes: exit 1, old vault, temp file removed ----

# The first write, fsync and fchmod are those of the temp file. After a
# failure vault unlinks the temp itself; a kill during that cleanup must
# still leave the old vault (and the next writer removes the temp).
for rule in write:error=ENOSPC fsync:error=EIO fchmod:error=EPERM rename:error=EXDEV \
	fsync:error=EIO+unlink:signal=KILL; do
	restore "$T/tmpl"
	opts=() traced=
	for r in ${rule//+/ }; do
		opts+=(-e "inject=$r:when=1")
		traced=$traced${traced:+,}${r%%:*}
	done
	opts+=(-e "trace=$traced")
	(strace -f -qq -o /dev/null "${opts[@]}" \
		"$VAULT" add added-key --host added.example.com <"$T/secret.in" >"$T/out" 2>"$T/err"
	exit $?) 2>/dev/null
	RC=$?
	LAST_CMD="strace ${opts[*]} vault add added-key"
	case $rule in
	*KILL) expect_rc 137 "vault add with $rule" ;;
	*)
		expect_rc 1 "vault add with $rule on the temp file"
		expect_err "vault:" "vault add with $rule on the temp file"
		expect_no_temps "vault add with $rule on the temp file"
		;;
	esac
	run list --json
	expect_rc 0 "after $rule the vault opens"
	check "after $rule the vault holds the old keys" test "$(norm "$T/out" added-key)" = "$OLD_NORM"
	later_write "after $rule" && ok "after $rule the next add works and cleans up"
done

finish
