#!/usr/bin/env bash
# contract.sh — the documented command-line contract of `vault`, good paths:
# init (once only, never overwriting), add with every --inject mode, host
# canonicalisation (default port, wildcard, IPv6, case, trailing dot), default
# and explicit --env, --allow-http, --ca (certificates only), list / show in
# text and JSON, rm, passwd, --help / --version, and how a secret is read
# from stdin (exactly one trailing newline stripped, length bounds).
. "$(dirname "$0")/lib.sh" "$@"
need openssl

# ---- help and version: no vault needed ----

run --help
expect_rc 0 "--help"
expect_out "usage: vault" "--help"
expect_out "add NAME" "--help"
run --version
expect_rc 0 "--version"
check "--version prints 'vault X.Y.Z'" grep -qE '^vault [0-9]+\.[0-9]+\.[0-9]+$' "$T/out"
run
expect_rc 2 "no command"
expect_err "usage: vault" "no command"
run add --help
expect_rc 0 "add --help"
expect_out "--inject MODE" "add --help"

# ---- init ----

# VAULT_HOME below a missing directory: init makes the path, all private.
export VAULT_HOME="$T/data/vrun"
run init --kdf interactive
expect_rc 0 "init"
expect_err "created" "init"
check "init makes VAULT_HOME mode 0700" test "$(stat -c %a "$VAULT_HOME")" = 700
check "init makes missing parents mode 0700" test "$(stat -c %a "$T/data")" = 700
check "init makes vault.db mode 0600" test "$(stat -c %a "$(db)")" = 600
check "vault.db starts with the magic" test "$(head -c 8 "$(db)")" = "VRUNVLT"

sum=$(db_sum)
run init --kdf interactive
expect_rc 1 "second init"
expect_err "already exists" "second init"
expect_db "$sum" "second init"
write_private "$T/other-pass" "other-$(rand_secret)"
VAULT_PASSPHRASE_FILE=$T/other-pass run init
expect_rc 1 "second init with another passphrase"
expect_db "$sum" "second init with another passphrase"
run list
expect_rc 0 "the vault still opens with the first passphrase"

# ---- an empty vault ----

run list
expect_rc 0 "list of an empty vault"
expect_no_out "list of an empty vault"
expect_err "no keys yet" "list of an empty vault"
run list --json
expect_rc 0 "list --json of an empty vault"
expect_json 'j == []' "list --json of an empty vault is []"

# ---- add: inject modes ----

# add_ok NAME ARGS...: add NAME with a fresh random secret; remembers its length.
declare -A SECRET_LEN
add_ok() {
	local name=$1 s
	shift
	s=$(rand_secret)
	run_secret "$s" add "$name" "$@"
	expect_rc 0 "add $name $*"
	expect_err "added '$name'" "add $name"
	SECRET_LEN[$name]=${#s}
}

add_ok ph --host ph.example.com
add_ok bear --host bear.example.com --inject bearer
add_ok bas --host bas.example.com --inject basic:x-access-token
add_ok hdr --host hdr.example.com --inject header:X-Api-Key
add_ok qry --host qry.example.com --inject query:api_key
add_ok plh --host plh.example.com --inject placeholder
for pair in ph:placeholder bear:bearer bas:basic:x-access-token hdr:header:X-Api-Key \
	qry:query:api_key plh:placeholder; do
	name=${pair%%:*} mode=${pair#*:}
	run show "$name" --json
	expect_rc 0 "show $name --json"
	expect_json "j['inject'] == '$mode'" "$name is stored with --inject $mode"
done
run show hdr
expect_out "inject:     header:X-Api-Key" "show hdr"

# ---- add: hosts ----

add_ok hosts --host api.example.com --host '*.example.com' --host '[::1]:8443' \
	--host API.Example.ORG. --host 10.0.0.1:8080 --host '[2001:DB8:0:0:0:0:0:1]' \
	--host trail.example.net.:8443 --host api.example.com --host API.EXAMPLE.COM:443
run show hosts --json
expect_rc 0 "show hosts --json"
expect_json 'j["hosts"] == ["api.example.com:443", "*.example.com:443", "[::1]:8443",
	"api.example.org:443", "10.0.0.1:8080", "[2001:db8::1]:443", "trail.example.net:8443"]' \
	"hosts canonical: default port 443, wildcard kept, IPv6 RFC 5952, lower case, no trailing dot, duplicates once"
run show hosts
expect_out "host:       *.example.com:443" "show hosts"
expect_out "host:       [::1]:8443" "show hosts"

# Longest names: 63-byte labels, 253 bytes in all (with or without the final dot).
label63=$(printf 'a%.0s' $(seq 1 63))
host253="$label63.$label63.$label63.$(printf 'b%.0s' $(seq 1 61))"
add_ok longhost --host "$host253" --host "$host253.:8443"
run show longhost --json
expect_json "j['hosts'] == ['$host253:443', '$host253:8443']" "a 253-byte host name is accepted"

# 32 hosts is the documented maximum and is accepted.
args=()
for i in $(seq 1 32); do args+=(--host "h$i.example.com"); done
add_ok many "${args[@]}"
run show many --json
expect_json 'len(j["hosts"]) == 32 and j["hosts"][31] == "h32.example.com:443"' "32 hosts stored"

# ---- add: env ----

add_ok deploy-key --host deploy.example.com
run show deploy-key --json
expect_json 'j["env"] == "DEPLOY_KEY"' "default env: deploy-key -> DEPLOY_KEY"
add_ok my.Key_2 --host k2.example.com
run show my.Key_2 --json
expect_json 'j["env"] == "MY_KEY_2"' "default env: my.Key_2 -> MY_KEY_2"
add_ok explicit --host ex.example.com --env CUSTOM_TOKEN_VAR
run show explicit --json
expect_json 'j["env"] == "CUSTOM_TOKEN_VAR"' "explicit --env kept"
run show explicit
expect_out "env:        CUSTOM_TOKEN_VAR" "show explicit"
long="k$(printf 'x%.0s' $(seq 1 63))"
add_ok "$long" --host long.example.com
run show "$long" --json
expect_json "j['name'] == '$long' and j['env'] == '${long^^}'" "a 64-character name is accepted"

# ---- add: --allow-http ----

add_ok plain --host plain.example.com:80 --allow-http
run show plain --json
expect_json 'j["allow_http"] is True' "--allow-http stored"
run show ph --json
expect_json 'j["allow_http"] is False' "allow_http false by default"
run show plain
expect_out "allow-http: yes" "show plain"

# ---- add: --ca ----

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=vault cli test CA" -keyout "$T/ca.key" -out "$T/ca.pem" >/dev/null 2>&1
check "openssl made a test CA" test -s "$T/ca.pem" -a -s "$T/ca.key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=second test CA" -keyout "$T/ca2.key" -out "$T/ca2.pem" >/dev/null 2>&1
cat "$T/ca.pem" "$T/ca2.pem" >"$T/bundle.pem"
add_ok withca --host private.example.internal --ca "$T/ca.pem"
add_ok withbundle --host private2.example.internal --ca "$T/bundle.pem"
rm -f "$T/ca.pem" "$T/bundle.pem"
run show withca --json
expect_json 'j["ca"] is True' "--ca stored (the file may be deleted afterwards)"
run show withbundle
expect_out "ca:         extra CA bundle stored" "show withbundle"
run show ph
expect_out "ca:         system roots only" "show ph"

sum=$(db_sum)
run_secret "$(rand_secret)" add badca1 --host x.example.com --ca "$T/ca.key"
expect_rc 1 "--ca with a private key"
expect_err "invalid CA bundle" "--ca with a private key"
expect_db "$sum" "--ca with a private key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=third" -keyout "$T/ca3.key" -out "$T/ca3.pem" >/dev/null 2>&1
cat "$T/ca3.pem" "$T/ca3.key" >"$T/cert-and-key.pem"
run_secret "$(rand_secret)" add badca2 --host x.example.com --ca "$T/cert-and-key.pem"
expect_rc 1 "--ca with a certificate plus its private key"
expect_err "invalid CA bundle" "--ca with a certificate plus its private key"
expect_db "$sum" "--ca with a certificate plus its private key"
head -c 600 /dev/urandom | base64 >"$T/notpem"
run_secret "$(rand_secret)" add badca3 --host x.example.com --ca "$T/notpem"
expect_rc 1 "--ca with a non-PEM file"
expect_err "invalid CA bundle" "--ca with a non-PEM file"
expect_db "$sum" "--ca with a non-PEM file"
run_secret "$(rand_secret)" add badca4 --host x.example.com --ca "$T/no-such-file.pem"
expect_rc 1 "--ca with a missing file"
expect_err "No such file" "--ca with a missing file"
expect_db "$sum" "--ca with a missing file"

# ---- list ----

NAMES="ph bear bas hdr qry plh hosts longhost many deploy-key my.Key_2 explicit $long plain withca withbundle"
run list
expect_rc 0 "list"
check "list: a header and one line per key" test "$(wc -l <"$T/out")" -eq $((1 + $(wc -w <<<"$NAMES")))
expect_out "NAME" "list"
check "list: deploy-key line shows inject, env and host" \
	grep -qE '^deploy-key +placeholder +DEPLOY_KEY +deploy\.example\.com:443$' "$T/out"
check "list: hdr line shows header:X-Api-Key" grep -qE '^hdr +header:X-Api-Key +HDR ' "$T/out"
check "list: plain line says (http allowed)" grep -qE '^plain .*plain\.example\.com:80 \(http allowed\)$' "$T/out"

run list --json
expect_rc 0 "list --json"
expect_json "[e['name'] for e in j] == '$NAMES'.split()" "list --json: every key, in the order added"
expect_json 'all(list(e) == ["name", "hosts", "inject", "env", "allow_http", "ca", "created", "changed"] for e in j)' \
	"list --json: fields name/hosts/inject/env/allow_http/ca/created/changed"
expect_json 'all(isinstance(e["hosts"], list) and isinstance(e["allow_http"], bool) and isinstance(e["ca"], bool) for e in j)' \
	"list --json: field types"
expect_json 'all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", e[f]) for e in j for f in ("created", "changed"))' \
	"list --json: created/changed are UTC ISO 8601"
expect_json '{e["name"]: (e["inject"], e["env"], e["allow_http"], e["ca"], e["hosts"][0]) for e in j if e["name"] in ("ph", "bas", "plain", "withca")} == {
	"ph": ("placeholder", "PH", False, False, "ph.example.com:443"),
	"bas": ("basic:x-access-token", "BAS", False, False, "bas.example.com:443"),
	"plain": ("placeholder", "PLAIN", True, False, "plain.example.com:80"),
	"withca": ("placeholder", "WITHCA", False, True, "private.example.internal:443")}' \
	"list --json: values of several keys"
cp "$T/out" "$T/list.json"

# ---- show ----

run show deploy-key --json
expect_rc 0 "show --json"
expect_json 'j == [e for e in json.load(open("'"$T"'/list.json")) if e["name"] == "deploy-key"][0]' \
	"show --json equals the key's list --json entry"
run show deploy-key
expect_rc 0 "show"
for field in name: host: inject: env: allow-http: ca: secret: created: changed:; do
	check "show prints '$field'" grep -q "^$field " "$T/out"
done
expect_out "secret:     ${SECRET_LEN[deploy-key]} bytes (never shown)" "show deploy-key: secret length"
run show nosuchkey
expect_rc 1 "show of an unknown key"
expect_err "no such key" "show of an unknown key"

# ---- secret on stdin: one trailing newline stripped, no more ----

secret_len() { # NAME: the length `vault show` reports
	"$VAULT" show "$1" </dev/null 2>/dev/null | sed -n 's/^secret: *\([0-9]*\) bytes.*/\1/p'
}
printf 'abc\n' >"$T/in"
run_in "$T/in" add nl1 --host nl.example.com
expect_rc 0 "secret 'abc\\n'"
check "secret 'abc\\n' is stored as 3 bytes" test "$(secret_len nl1)" = 3
printf 'abc' >"$T/in"
run_in "$T/in" add nl0 --host nl.example.com
expect_rc 0 "secret 'abc' without newline"
check "secret 'abc' is stored as 3 bytes" test "$(secret_len nl0)" = 3
sum=$(db_sum)
printf 'abc\n\n' >"$T/in"
run_in "$T/in" add nl2 --host nl.example.com
expect_rc 1 "secret 'abc\\n\\n' (only one newline is stripped)"
expect_err "LF" "secret 'abc\\n\\n'"
expect_db "$sum" "secret 'abc\\n\\n'"
printf '  spaced\tout \xc3\xa9\n' >"$T/in"
run_in "$T/in" add spaced --host nl.example.com
expect_rc 0 "secret with blanks, a tab and UTF-8"
check "blanks are kept: 15 bytes" test "$(secret_len spaced)" = 15
head -c 16384 /dev/zero | tr '\0' 'x' >"$T/in"
run_in "$T/in" add max --host nl.example.com
expect_rc 0 "secret of 16384 bytes"
check "16384 bytes stored" test "$(secret_len max)" = 16384
printf '\n' >>"$T/in"
run_in "$T/in" add maxnl --host nl.example.com
expect_rc 0 "secret of 16384 bytes plus newline"
check "16384 bytes stored" test "$(secret_len maxnl)" = 16384
for n in ph bas deploy-key; do
	check "show $n reports the length of its secret (${SECRET_LEN[$n]})" \
		test "$(secret_len "$n")" = "${SECRET_LEN[$n]}"
done

# ---- rm ----

run rm deploy-key
expect_rc 0 "rm deploy-key"
expect_err "removed 'deploy-key'" "rm deploy-key"
run show deploy-key
expect_rc 1 "show after rm"
expect_err "no such key" "show after rm"
run list --json
expect_json '"deploy-key" not in [e["name"] for e in j] and "ph" in [e["name"] for e in j]' \
	"rm removes that key only"
sum=$(db_sum)
run rm deploy-key
expect_rc 1 "rm of a removed key"
expect_err "no such key" "rm of a removed key"
expect_db "$sum" "rm of a removed key"
add_ok deploy-key --host deploy.example.com
run show deploy-key --json
expect_json 'j["env"] == "DEPLOY_KEY"' "a removed key's name and variable can be used again"

# ---- passwd ----

run list --json
cp "$T/out" "$T/before.json"
kdf_before=$(od -An -tx1 -j12 -N16 "$(db)")
NEWPASS="new-$(rand_secret)"
write_private "$T/newpass" "$NEWPASS"
VAULT_NEW_PASSPHRASE_FILE=$T/newpass run passwd
expect_rc 0 "passwd"
expect_err "passphrase changed" "passwd"
check "passwd keeps the KDF cost" test "$(od -An -tx1 -j12 -N16 "$(db)")" = "$kdf_before"
check "passwd keeps vault.db mode 0600" test "$(stat -c %a "$(db)")" = 600
run list
expect_rc 1 "the old passphrase after passwd"
expect_err "cannot decrypt" "the old passphrase after passwd"
export VAULT_PASSPHRASE_FILE=$T/newpass
run list --json
expect_rc 0 "the new passphrase after passwd"
check "passwd keeps every key and field" cmp -s "$T/out" "$T/before.json"

# The passphrase file's first line counts; a CRLF ending is tolerated; a pipe works.
printf '%s\r\nsecond line\n' "$NEWPASS" >"$T/crlf"
chmod 600 "$T/crlf"
VAULT_PASSPHRASE_FILE=$T/crlf run list
expect_rc 0 "passphrase file with CRLF and a second line"
VAULT_PASSPHRASE_FILE=<(printf '%s\n' "$NEWPASS") run list
expect_rc 0 "passphrase from a pipe"
VAULT_HOME=$VAULT_HOME/ run list
expect_rc 0 "VAULT_HOME with a trailing slash"

finish
