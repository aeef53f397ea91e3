#!/usr/bin/env bash
# completion.sh — contrib/bash-completion/vrun: it loads in a plain bash
# without errors and registers vault, vproxy and vrun; it completes
# subcommands and options, only those a command takes (`vault audit verify`
# takes no filters); key names come from `vproxy status --keys` when
# vproxy runs, from `vault list --json` only when VAULT_PASSPHRASE_FILE is
# set, and otherwise not at all: completion never runs vault without a
# passphrase file, so it can never prompt (a stand-in vault records calls).
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"

SCRIPT="$SRC/contrib/bash-completion/vrun"

# PATH: vproxy and vrun, and a vault that logs each call before running.
mkdir "$T/bin"
ln -s "$VPROXY" "$T/bin/vproxy"
ln -s "$VRUN" "$T/bin/vrun"
cat >"$T/bin/vault" <<SH
#!/bin/sh
echo "\$*" >>"$T/vault-calls"
exec "$VAULT" "\$@"
SH
chmod +x "$T/bin/vault"
export PATH="$T/bin:$PATH"

# comp LINE: the completions bash would offer for LINE (cursor at its end),
# one per line, into $T/out.
comp() {
	LAST_CMD="complete '$1'"
	timeout 20 bash --norc --noprofile -c '
		. "$1" || exit 1
		line=$2
		read -ra COMP_WORDS <<<"$line"
		[[ $line == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE=$line
		COMP_POINT=${#line}
		fn=$(complete -p "${COMP_WORDS[0]}" | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
		"$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}"
	' bash "$SCRIPT" "$1" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
}

# offers LINE WORD...: each WORD is among the completions of LINE.
offers() {
	local line=$1 w missing=""
	shift
	comp "$line"
	for w in "$@"; do
		grep -qxF -- "$w" "$T/out" || missing="$missing $w"
	done
	if [ "$RC" -eq 0 ] && [ -z "$missing" ]; then
		ok "'$line' offers $*"
	else
		not_ok "'$line' lacks:$missing"
		dump_last
	fi
}

# offers_only LINE WORD...: exactly these completions, in any order.
offers_only() {
	local line=$1 want got
	shift
	comp "$line"
	want=$(printf '%s\n' "$@" | sort)
	got=$(grep -v '^$' "$T/out" | sort)
	if [ "$RC" -eq 0 ] && [ "$want" = "$got" ]; then
		ok "'$line' offers exactly: $*"
	else
		not_ok "'$line': expected [$*], got [$(echo $got)]"
		dump_last
	fi
}

bash --norc --noprofile -c '. "$1" && complete -p vault vproxy vrun' bash "$SCRIPT" >"$T/out" 2>"$T/err"
RC=$?
LAST_CMD="source $SCRIPT"
expect_rc 0 "the script loads in bash"
expect_no_err "the script loads"
expect_out "complete -F _vault vault" "registers vault"
expect_out "complete -F _vproxy vproxy" "registers vproxy"
expect_out "complete -F _vrun vrun" "registers vrun"

# ---- subcommands and options ----

offers "vault " init add list show rm passwd audit doctor help --help --version
offers_only "vault au" audit
offers "vault add k --" --host --inject --env --ca --allow-http --help
offers_only "vault init --kdf " interactive moderate sensitive
offers "vault add k --inject " placeholder bearer basic: header: query:
offers "vault audit " verify --session --key --since --denied --json --follow --summary --limit --all
offers "vault audit -" -n --limit --all
offers_only "vault audit verify " --help # verify takes no filters
offers_only "vault audit verify --" --help
offers_only "vault audit -n " # a number
offers_only "vault audit --json v" # verify only right after `audit`
offers_only "vault help pa" passwd
offers_only "vproxy " start stop status help --help --version
offers "vproxy start --" --foreground --resolve --timeout --verbose --help
offers_only "vproxy start --timeout h" head= handshake=
offers "vproxy status --" --json --keys --verbose --help
offers "vrun --" --key --allow-host --profile --check --verbose --help --version --
offers_only "vrun --profile " agent strict
offers "vrun -k deploy-key -- ech" echo
offers "vrun -k deploy-key ech" echo

# ---- key names ----

make_vault
rm -f "$T/vault-calls"
PASSFILE=$VAULT_PASSPHRASE_FILE
unset VAULT_PASSPHRASE_FILE
offers_only "vrun --key " # vproxy down, no passphrase file: nothing
check "without vproxy or a passphrase file, vault is never run" test ! -e "$T/vault-calls"

VAULT_PASSPHRASE_FILE=$PASSFILE offers_only "vrun -k " deploy-key
check "with VAULT_PASSPHRASE_FILE set, names come from vault list --json" grep -qx "list --json" "$T/vault-calls"

VAULT_PASSPHRASE_FILE=$PASSFILE "$VPROXY" start </dev/null >/dev/null 2>&1
rm -f "$T/vault-calls"
offers_only "vrun -k " deploy-key
offers_only "vrun -k dep" deploy-key
offers_only "vault show " deploy-key
offers_only "vault rm d" deploy-key
offers_only "vault audit --key " deploy-key
check "with vproxy running, names come from it: vault is never run" test ! -e "$T/vault-calls"
export VAULT_PASSPHRASE_FILE=$PASSFILE

finish
