#!/usr/bin/env bash
# concurrency.sh — writers are serialized by the exclusive lock, so parallel
# `vault add` / `vault rm` processes all succeed and none loses another's
# change; readers running meanwhile always see a whole vault (atomic rename);
# racing `vault init`s create exactly one vault; racing adds of one name or
# one variable let exactly one win.
. "$(dirname "$0")/lib.sh" "$@"

N=8
init_vault

# A reader loop: `vault list --json` over and over until $T/stop appears;
# every failure or unparsable output is recorded in $T/reader.fail.
start_reader() {
	rm -f "$T/stop" "$T/reader.fail" "$T/reader.count"
	(
		n=0
		while [ ! -e "$T/stop" ]; do
			if ! "$VAULT" list --json </dev/null >"$T/r.out" 2>"$T/r.err" ||
				! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/r.out" 2>/dev/null; then
				{ echo "read $n failed:"; cat "$T/r.err"; } >>"$T/reader.fail"
			fi
			n=$((n + 1))
		done
		echo "$n" >"$T/reader.count"
	) &
	READER=$!
}

stop_reader() {
	: >"$T/stop"
	wait "$READER"
	if [ -s "$T/reader.fail" ]; then
		not_ok "$1: a concurrent reader failed"
		sed 's/^/#   /' "$T/reader.fail" | head -20
	else
		ok "$1: $(cat "$T/reader.count") concurrent reads all saw a whole vault"
	fi
}

# wait_all DESC: wait for every pid in PIDS; each must exit 0.
wait_all() {
	local pid bad=0 i=0
	for pid in "${PIDS[@]}"; do
		if ! wait "$pid"; then
			bad=$((bad + 1))
			sed "s/^/#   ${NAMES[$i]}: /" "$T/job.${NAMES[$i]}.err"
		fi
		i=$((i + 1))
	done
	if [ "$bad" -eq 0 ]; then ok "$1: all ${#PIDS[@]} succeeded"; else not_ok "$1: $bad failed"; fi
}

# bg_add NAME: start `vault add NAME` in the background with its own secret,
# whose length goes into $T/len.NAME.
bg_add() {
	local s
	s=$(rand_secret $((RANDOM % 40 + 8)))
	printf '%s' "$s" >"$T/secret.$1"
	echo "${#s}" >"$T/len.$1"
	"$VAULT" add "$1" --host "$1.example.com" <"$T/secret.$1" >/dev/null 2>"$T/job.$1.err" &
	PIDS+=($!)
	NAMES+=("$1")
}

bg_rm() {
	"$VAULT" rm "$1" </dev/null >/dev/null 2>"$T/job.$1.err" &
	PIDS+=($!)
	NAMES+=("$1")
}

# expect_keys DESC NAME...: the vault holds exactly these keys (any order).
expect_keys() {
	local desc=$1
	shift
	run list --json
	expect_rc 0 "$desc: list --json"
	expect_json "sorted(e['name'] for e in j) == sorted('$*'.split())" "$desc: exactly the expected keys"
}

# expect_lengths NAME...: each key's secret is its own (by length).
expect_lengths() {
	local n got bad=0
	for n in "$@"; do
		got=$("$VAULT" show "$n" </dev/null 2>/dev/null | sed -n 's/^secret: *\([0-9]*\) bytes.*/\1/p')
		if [ "$got" != "$(cat "$T/len.$n")" ]; then
			bad=$((bad + 1))
			echo "#   $n: secret of $got bytes, expected $(cat "$T/len.$n")"
		fi
	done
	if [ "$bad" -eq 0 ]; then ok "every key kept its own secret"; else not_ok "$bad keys hold a wrong secret"; fi
}

# ---- rounds of N parallel adds, with a reader running ----

ALL=()
for round in 1 2 3; do
	PIDS=() NAMES=()
	start_reader
	for i in $(seq 1 $N); do bg_add "r$round-key$i"; done
	wait_all "round $round: $N parallel vault add"
	stop_reader "round $round"
	ALL+=("${NAMES[@]}")
	expect_keys "round $round" "${ALL[@]}"
	expect_no_temps "round $round"
done
expect_lengths "${ALL[@]}"

# ---- adds and removes mixed ----

PIDS=() NAMES=()
start_reader
for i in $(seq 1 $N); do
	bg_add "mix-key$i"
	bg_rm "r1-key$i"
done
wait_all "$N parallel vault add mixed with $N parallel vault rm"
stop_reader "add+rm"
KEEP=()
for k in "${ALL[@]}"; do case $k in r1-*) ;; *) KEEP+=("$k") ;; esac done
for i in $(seq 1 $N); do KEEP+=("mix-key$i"); done
expect_keys "add+rm" "${KEEP[@]}"
expect_no_temps "add+rm"

# ---- the same name, or the same variable, from several writers at once ----

PIDS=()
for i in 1 2 3 4; do
	printf 'same-%s' "$(rand_secret)" >"$T/same.$i"
	"$VAULT" add same --host "same$i.example.com" <"$T/same.$i" >/dev/null 2>"$T/same.$i.err" &
	PIDS+=($!)
done
wins=0
for pid in "${PIDS[@]}"; do wait "$pid" && wins=$((wins + 1)); done
check "4 racing adds of one name: exactly one wins (got $wins)" test "$wins" -eq 1
check "the losers say the name exists" test "$(cat "$T"/same.*.err | grep -c 'a key with that name exists')" -eq 3

PIDS=()
for i in 1 2 3 4; do
	printf 'env-%s' "$(rand_secret)" >"$T/env.$i"
	"$VAULT" add "envrace$i" --env SHARED_VAR --host e.example.com <"$T/env.$i" >/dev/null \
		2>"$T/env.$i.err" &
	PIDS+=($!)
done
wins=0
for pid in "${PIDS[@]}"; do wait "$pid" && wins=$((wins + 1)); done
check "4 racing adds of one --env: exactly one wins (got $wins)" test "$wins" -eq 1
run list --json
expect_json 'sum(1 for e in j if e["env"] == "SHARED_VAR") == 1' "one key holds SHARED_VAR"

# ---- racing inits ----

export VAULT_HOME=$T/racehome
PIDS=()
for i in 1 2 3 4; do
	write_private "$T/racepass.$i" "race-$i-$(rand_secret)"
	VAULT_PASSPHRASE_FILE=$T/racepass.$i "$VAULT" init --kdf interactive </dev/null \
		>/dev/null 2>"$T/init.$i.err" &
	PIDS+=($!)
done
winner=
wins=0
for i in 1 2 3 4; do
	if wait "${PIDS[$((i - 1))]}"; then
		wins=$((wins + 1))
		winner=$i
	fi
done
check "4 racing inits: exactly one succeeds (got $wins)" test "$wins" -eq 1
check "the losers say a vault exists" test "$(cat "$T"/init.*.err | grep -c 'already exists')" -eq 3
if [ -n "$winner" ]; then
	VAULT_PASSPHRASE_FILE=$T/racepass.$winner run list --json
	expect_rc 0 "the vault opens with the winner's passphrase"
	for i in 1 2 3 4; do
		[ "$i" = "$winner" ] && continue
		VAULT_PASSPHRASE_FILE=$T/racepass.$i run list
		expect_rc 1 "init $i lost: its passphrase does not open the vault"
	done
fi

finish
