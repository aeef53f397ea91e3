#!/usr/bin/env bash
# help.sh — help, version and usage errors of vault, vproxy and vrun: every
# program and every subcommand answers -h/--help (and `help COMMAND`) with
# its usage on stdout and exit 0; --version names the program and the
# project's version, the same for all three; a bad option, a missing value or
# an unknown command is a usage error on stderr that names the problem and
# where the help is, with nothing on stdout. Quiet by default: stdout carries
# only what was asked for, never chatter; a vault command that changes the
# vault (init, add, rm, passwd) confirms it in exactly one line on stderr,
# as `vproxy start` reports its pid in one line.
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"

# ---- --help everywhere ----

for cmd in init add list show rm passwd audit doctor help; do
	run "$cmd" --help
	expect_rc 0 "vault $cmd --help"
	check "vault $cmd --help starts with its usage" grep -q "^usage: vault $cmd" "$T/out"
	expect_no_err "vault $cmd --help"
	run help "$cmd"
	expect_rc 0 "vault help $cmd"
	check "vault help $cmd is vault $cmd --help" grep -q "^usage: vault $cmd" "$T/out"
done
run audit verify --help
expect_rc 0 "vault audit verify --help"
expect_out "usage: vault audit verify" "vault audit verify --help"
for args in --help -h help; do
	run $args
	expect_rc 0 "vault $args"
	expect_out "usage: vault" "vault $args"
	expect_out "doctor" "vault $args lists doctor"
done

for cmd in start stop status; do
	runp "$VPROXY" "$cmd" --help
	expect_rc 0 "vproxy $cmd --help"
	check "vproxy $cmd --help starts with its usage" grep -q "^usage: vproxy $cmd" "$T/out"
	runp "$VPROXY" help "$cmd"
	expect_rc 0 "vproxy help $cmd"
	check "vproxy help $cmd is vproxy $cmd --help" grep -q "^usage: vproxy $cmd" "$T/out"
done
for args in --help -h help; do
	runp "$VPROXY" $args
	expect_rc 0 "vproxy $args"
	expect_out "usage: vproxy start" "vproxy $args"
done

for args in --help -h help; do
	runp "$VRUN" $args
	expect_rc 0 "vrun $args"
	expect_out "usage: vrun --key NAME" "vrun $args"
	expect_out "vrun --check" "vrun $args shows --check"
done

# ---- --version ----

versions=""
for prog in "$VAULT" "$VPROXY" "$VRUN"; do
	name=$(basename "$prog")
	runp "$prog" --version
	expect_rc 0 "$name --version"
	check "$name --version prints '$name X.Y.Z'" grep -qE "^$name [0-9]+\.[0-9]+\.[0-9]+$" "$T/out"
	versions="$versions $(cut -d' ' -f2 "$T/out")"
done
check "the three programs report one version" test "$(echo $versions | tr ' ' '\n' | sort -u | wc -l)" -eq 1

# ---- usage errors: what is wrong, and where the help is ----

run add --bogus
expect_rc 2 "vault add --bogus"
expect_err "bad option '--bogus'" "vault add --bogus"
expect_err "Try \`vault add --help\`" "vault add --bogus"
expect_no_out "vault add --bogus"
run audit --since
expect_rc 2 "vault audit --since (no value)"
expect_err "option '--since' needs a value" "vault audit --since"
run frobnicate
expect_rc 2 "vault frobnicate"
expect_err "unknown command 'frobnicate'" "vault frobnicate"
expect_err "Try \`vault --help\`" "vault frobnicate"
run --bogus
expect_rc 2 "vault --bogus"
expect_err "expected a command first" "vault --bogus"
run help nope
expect_rc 2 "vault help nope"
expect_err "no command 'nope'" "vault help nope"

runp "$VPROXY" start --bogus
expect_rc 2 "vproxy start --bogus"
expect_err "start: unknown option '--bogus'" "vproxy start --bogus"
expect_err "Try \`vproxy" "vproxy start --bogus"
expect_no_out "vproxy start --bogus"
runp "$VPROXY" start --resolve
expect_rc 2 "vproxy start --resolve (no value)"
expect_err "needs a value" "vproxy start --resolve"
runp "$VPROXY" frob
expect_rc 2 "vproxy frob"
expect_err "unknown command 'frob' (commands: start, stop, status)" "vproxy frob"
runp "$VPROXY" stop --json
expect_rc 2 "vproxy stop --json"
expect_err "--json and --keys go with status" "vproxy stop --json"
runp "$VPROXY" status --json --keys
expect_rc 2 "vproxy status --json --keys"
expect_err "status: --json and --keys do not go together" "vproxy status --json --keys"
runp "$VPROXY" status --jso
expect_rc 2 "vproxy status --jso"
expect_err "status: option '--jso' is abbreviated: write '--json'" "vproxy status --jso"
runp "$VPROXY" start --fore
expect_rc 2 "vproxy start --fore"
expect_err "start: option '--fore' is abbreviated: write '--foreground'" "vproxy start --fore"
runp "$VPROXY" start --res=a.test:443:127.0.0.1
expect_rc 2 "vproxy start --res=..."
expect_err "start: option '--res' is abbreviated: write '--resolve'" "vproxy start --res=..."
runp "$VPROXY"
expect_rc 2 "vproxy without a command"
expect_err "usage: vproxy" "vproxy without a command"

runp "$VRUN" --verb --check
expect_rc 125 "vrun --verb"
expect_err "option '--verb' is abbreviated: write '--verbose'" "vrun --verb"
runp "$VRUN" --bogus
expect_rc 125 "vrun --bogus"
expect_err "unknown or incomplete option '--bogus'" "vrun --bogus"
expect_err "Try \`vrun --help\`" "vrun --bogus"
runp "$VRUN" -- true
expect_rc 125 "vrun without --key"
expect_err "give at least one --key NAME" "vrun without --key"
runp "$VRUN" -k deploy
expect_rc 125 "vrun without a command"
expect_err "no command to run" "vrun without a command"
runp "$VRUN" --check -- true
expect_rc 125 "vrun --check with a command"
expect_err "--check runs no command" "vrun --check with a command"
expect_no_out "vrun --check with a command"

# ---- errors that say what to do next ----

run list
expect_rc 1 "vault list without a vault"
expect_err "no vault yet: create one with \`vault init\`" "vault list without a vault"
runp "$VPROXY" status
expect_rc 3 "vproxy status when not running"
expect_err "start it with \`vproxy start\`" "vproxy status when not running"
runp "$VRUN" -k deploy -- true
expect_rc 125 "vrun without vproxy"
expect_err "vproxy is not running: start it with \`vproxy start\`" "vrun without vproxy"
runp "$VRUN" --profile no-such-profile -k deploy -- true
expect_rc 125 "vrun with an unknown profile"
expect_err "profile: " "vrun with an unknown profile"

# ---- quiet by default ----

# one_line DESC: nothing on stdout, exactly one line on stderr.
one_line() {
	expect_no_out "$1"
	check "$1: one line on stderr" test "$(wc -l <"$T/err")" -eq 1
}
run init --kdf interactive
expect_rc 0 "vault init"
one_line "vault init"
expect_err "vault: created " "vault init"
run list
expect_rc 0 "vault list, no keys"
expect_no_out "vault list, no keys"
run_secret "s3cret-value" add quiet-key --host q.example.test
expect_rc 0 "vault add"
one_line "vault add"
expect_err "vault: added 'quiet-key'" "vault add"
run rm quiet-key
expect_rc 0 "vault rm"
one_line "vault rm"
expect_err "vault: removed 'quiet-key'" "vault rm"
VAULT_NEW_PASSPHRASE_FILE=$VAULT_PASSPHRASE_FILE run passwd
expect_rc 0 "vault passwd"
one_line "vault passwd"
expect_err "vault: passphrase changed" "vault passwd"

finish
