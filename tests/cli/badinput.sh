#!/usr/bin/env bash
# badinput.sh — security invariant 7, "bad input anywhere gets a clear error
# and loses nothing": every malformed secret, name, host, --inject, --env,
# command line, passphrase source or VAULT_HOME is refused with the right exit
# status (2 usage error, 1 failure) and a message saying what is wrong, and
# vault.db stays byte-for-byte the same with no temp file left behind.
. "$(dirname "$0")/lib.sh" "$@"
need setsid

# refuse RC TEXT INPUT ARGS...: `vault ARGS < INPUT` exits RC, says TEXT on
# stderr, prints nothing on stdout, and leaves vault.db alone.
refuse() {
	local rc=$1 text=$2 input=$3 sum desc
	shift 3
	desc="vault $(printf '%q ' "$@")"
	sum=$(db_sum)
	run_in "$input" "$@"
	expect_rc "$rc" "$desc"
	expect_err "$text" "$desc"
	expect_no_out "$desc"
	expect_db "$sum" "$desc"
}

GOOD=$T/good.in
printf '%s\n' "$(rand_secret)" >"$GOOD"

# ---- before `vault init`: every command points at it ----

refuse 1 "vault init" /dev/null list
refuse 1 "vault init" /dev/null list --json
refuse 1 "vault init" /dev/null show some-key
refuse 1 "vault init" /dev/null rm some-key
refuse 1 "vault init" /dev/null passwd
refuse 1 "vault init" "$GOOD" add some-key --host api.example.com
check "nothing created before init" test ! -e "$VAULT_HOME"

init_vault
printf 'first-%s' "$(rand_secret)" >"$T/first.in"
run_in "$T/first.in" add first --host first.example.com
expect_rc 0 "add first"
printf 'a-b-%s' "$(rand_secret)" >"$T/ab.in"
run_in "$T/ab.in" add a-b --host ab.example.com
expect_rc 0 "add a-b"
check "vault.db exists" test -s "$(db)"

# ---- secrets ----

: >"$T/empty.in"
printf '\n' >"$T/nl.in"
printf 'a\rb' >"$T/cr.in"
printf 'a\nb' >"$T/lf.in"
printf 'a\0b' >"$T/nul.in"
printf 'abc\r\n' >"$T/crlf.in"
head -c 16385 /dev/zero | tr '\0' 'x' >"$T/big.in"
head -c 16385 /dev/zero | tr '\0' 'x' >"$T/bignl.in"
printf '\n' >>"$T/bignl.in"
head -c 100000 /dev/urandom | base64 -w0 >"$T/huge.in"
refuse 1 "empty secret" "$T/empty.in" add s1 --host s.example.com
refuse 1 "empty secret" "$T/nl.in" add s1 --host s.example.com
refuse 1 "CR, LF or NUL" "$T/cr.in" add s1 --host s.example.com
refuse 1 "CR, LF or NUL" "$T/lf.in" add s1 --host s.example.com
refuse 1 "CR, LF or NUL" "$T/nul.in" add s1 --host s.example.com
refuse 1 "CR, LF or NUL" "$T/crlf.in" add s1 --host s.example.com
refuse 1 "at most 16384 bytes" "$T/big.in" add s1 --host s.example.com
refuse 1 "at most 16384 bytes" "$T/bignl.in" add s1 --host s.example.com
refuse 1 "at most 16384 bytes" "$T/huge.in" add s1 --host s.example.com

# ---- key names ----

refuse 2 "invalid key name" "$GOOD" add 9lives --host n.example.com
refuse 2 "invalid key name" "$GOOD" add "" --host n.example.com
refuse 2 "invalid key name" "$GOOD" add "k$(printf 'x%.0s' $(seq 1 64))" --host n.example.com
refuse 2 "invalid key name" "$GOOD" add a/b --host n.example.com
refuse 2 "invalid key name" "$GOOD" add "a b" --host n.example.com
refuse 2 "invalid key name" "$GOOD" add "clé" --host n.example.com
refuse 2 "invalid key name" "$GOOD" add "ключ" --host n.example.com
refuse 2 "invalid key name" "$GOOD" add _under --host n.example.com
refuse 2 "invalid key name" "$GOOD" add .dot --host n.example.com
# shellcheck disable=SC2016 # a literal '$'
refuse 2 "invalid key name" "$GOOD" add 'a$b' --host n.example.com

# ---- hosts ----

for h in a.example.com:0 a.example.com:65536 a.example.com:0443 a.example.com: \
	a.example.com:-1 a.example.com:44x a.example.com:99999999999999999999 '[::1]:0'; do
	refuse 2 "invalid port" "$GOOD" add h1 --host "$h"
done
for h in '*.com' 'a.*.com' '*' '*.*.example.com' '**.example.com' '*.1.2.3.4' 'a*.example.com'; do
	refuse 2 "invalid wildcard" "$GOOD" add h1 --host "$h"
done
label63=$(printf 'a%.0s' $(seq 1 63))
for h in 1.2.3 0x7f.1 256.1.1.1 01.2.3.4 '::1' 2001:db8::1 '::1:443' a_b.example.com \
	"${label63}b.example.com" "$label63.$label63.$label63.$label63.com" '' . example..com \
	-a.example.com a-.example.com '[::1' '[::1]x' '[1.2.3.4]' '[]' 'exa mple.com' \
	'example.com/path' 'user@example.com' 'ex%61mple.com' 'héllo.example.com'; do
	refuse 2 "invalid host" "$GOOD" add h1 --host "$h"
done
# A URL where a host belongs: say so, and what to type instead.
refuse 2 "give a host name, not a URL: --host api.example.com" "$GOOD" add h1 --host https://api.example.com/v1
refuse 2 "give a host name, not a URL: --host x.example.com:80 (and --allow-http" "$GOOD" add h1 --host http://x.example.com
refuse 2 "give a host name, not a URL: --host [::1]:8443" "$GOOD" add h1 --host 'https://user@[::1]:8443/p?q=1'
refuse 2 "give a host name, not a URL" "$GOOD" add h1 --host https://
# 254 bytes: one more than a DNS name may have.
refuse 2 "invalid host" "$GOOD" add h1 --host "$label63.$label63.$label63.${label63}b"
args=()
for i in $(seq 1 33); do args+=(--host "h$i.example.com"); done
refuse 2 "at most 32" "$GOOD" add h1 "${args[@]}"
# A good host after a bad one does not rescue the command.
refuse 2 "invalid port" "$GOOD" add h1 --host ok.example.com --host bad.example.com:0

# ---- --inject ----

for m in token Bearer 'bearer:x' 'placeholder:x' basic 'basic:' 'basic:a:b' 'basic:a b' \
	header 'header:' 'header:Host' 'header:Content-Length' 'header:transfer-encoding' \
	'header:Proxy-Authorization' 'header:bad name' 'header:a:b' 'query:' 'query:a=b' \
	'query:a&b' ''; do
	refuse 2 "invalid --inject" "$GOOD" add i1 --host i.example.com --inject "$m"
done

# ---- --env ----

for e in 1ABC A-B 'A B' '' "V$(printf 'x%.0s' $(seq 1 64))"; do
	refuse 2 "invalid variable name" "$GOOD" add e1 --host e.example.com --env "$e"
done
for e in PATH HTTPS_PROXY https_proxy HTTP_PROXY NO_PROXY SSL_CERT_FILE LD_PRELOAD \
	LD_LIBRARY_PATH VAULT_HOME VAULT_PASSPHRASE_FILE HOME; do
	refuse 2 "variable reserved" "$GOOD" add e1 --host e.example.com --env "$e"
done
# A name whose default variable is reserved must say so and suggest --env.
refuse 2 "reserved" "$GOOD" add path --host e.example.com
refuse 2 "reserved" "$GOOD" add ld-preload --host e.example.com
# Taken variables: explicit, and derived from the name (a.b -> A_B, like a-b).
refuse 1 "already uses it" "$GOOD" add e1 --host e.example.com --env FIRST
refuse 1 "already uses it" "$GOOD" add a.b --host e.example.com

# ---- names, commands and options ----

refuse 1 "a key with that name exists" "$GOOD" add first --host other.example.com
refuse 2 "unknown command" /dev/null frobnicate
refuse 2 "unknown command" /dev/null LIST
refuse 2 "missing NAME" "$GOOD" add --host n.example.com
refuse 2 "expected one NAME" /dev/null show
refuse 2 "expected one NAME" /dev/null rm
refuse 2 "expected one NAME, not also 'extra'" /dev/null show first extra
refuse 2 "expected one NAME, not also 'extra'" /dev/null rm first extra
refuse 2 "unexpected argument 'extra'" "$GOOD" add n1 extra --host n.example.com
refuse 2 "list: unexpected argument 'extra'" /dev/null list extra
refuse 2 "unexpected argument 'extra'" /dev/null init extra
refuse 2 "audit verify: unexpected argument 'extra'" /dev/null audit verify extra
refuse 2 "Try \`vault audit verify --help\`" /dev/null audit verify extra
refuse 2 "bad option" /dev/null list --bogus
# Long options are never abbreviated: a prefix is refused with the full name.
refuse 2 "list: option '--js' is abbreviated: write '--json'" /dev/null list --js
refuse 2 "add: option '--ho' is abbreviated: write '--host'" "$GOOD" add n1 --ho n.example.com
refuse 2 "add: option '--ho' is abbreviated: write '--host'" "$GOOD" add n1 --ho=n.example.com
refuse 2 "audit: option '--sum' is abbreviated: write '--summary'" /dev/null audit --sum
refuse 2 "doctor: option '--verb' is abbreviated: write '--verbose'" /dev/null doctor --verb
refuse 2 "init: option '--kd' is abbreviated: write '--kdf'" /dev/null init --kd interactive
refuse 2 "audit verify: option '--he' is abbreviated: write '--help'" /dev/null audit verify --he
refuse 2 "bad option" "$GOOD" add n1 --host n.example.com --bogus
refuse 2 "--kdf" /dev/null passwd --kdf fast
refuse 2 "--kdf" /dev/null init --kdf ''
refuse 2 "not an option of rm" /dev/null rm --json first
refuse 1 "no such key" /dev/null rm nosuchkey
refuse 1 "no such key" /dev/null show nosuchkey

# --ca that is not a small regular file.
refuse 1 "larger than 256 KiB" "$GOOD" add c1 --host c.example.com --ca /dev/zero
refuse 1 "Is a directory" "$GOOD" add c1 --host c.example.com --ca "$T"

# Output that cannot be written is an error, not a silent success.
for cmd in list "list --json" "show first" "show first --json" --help --version "add --help"; do
	LAST_CMD="vault $cmd >/dev/full"
	# shellcheck disable=SC2086
	"$VAULT" $cmd </dev/null >/dev/full 2>"$T/err"
	RC=$?
	: >"$T/out"
	expect_rc 1 "vault $cmd with stdout on a full disk"
	expect_err "No space left on device" "vault $cmd with stdout on a full disk"
done

# No --host in a script: refused before the secret or the vault is touched.
refuse 2 "--host is required" "$GOOD" add nohost
setsid -w "$VAULT" add nohost2 <"$GOOD" >"$T/out" 2>"$T/err"
RC=$?
LAST_CMD="setsid -w vault add nohost2 < secret"
expect_rc 2 "add without --host and without a terminal"
expect_err "--host is required" "add without --host and without a terminal"

# ---- passphrase sources ----

# no_tty ARGS...: vault in a new session (no controlling terminal), stdin INPUT.
no_tty() {
	local input=$1
	shift
	LAST_CMD="setsid -w vault $* < $input (no VAULT_PASSPHRASE_FILE)"
	env -u VAULT_PASSPHRASE_FILE -u VAULT_NEW_PASSPHRASE_FILE \
		setsid -w "$VAULT" "$@" <"$input" >"$T/out" 2>"$T/err"
	RC=$?
}
for cmd in list "show first" "rm first" passwd; do
	sum=$(db_sum)
	# shellcheck disable=SC2086
	no_tty /dev/null $cmd
	expect_rc 1 "$cmd without passphrase file or terminal"
	expect_err "VAULT_PASSPHRASE_FILE" "$cmd without passphrase file or terminal"
	expect_db "$sum" "$cmd without passphrase file or terminal"
done
sum=$(db_sum)
no_tty "$GOOD" add nopass --host n.example.com
expect_rc 1 "add without passphrase file or terminal"
expect_err "VAULT_PASSPHRASE_FILE" "add without passphrase file or terminal"
expect_db "$sum" "add without passphrase file or terminal"
VAULT_HOME=$T/fresh no_tty /dev/null init --kdf interactive
expect_rc 1 "init without passphrase file or terminal"
expect_err "VAULT_PASSPHRASE_FILE" "init without passphrase file or terminal"
check "init without a passphrase creates no vault" test ! -e "$T/fresh/vault.db"

# passwd has the current passphrase but no new one: the message must name the
# variable that is missing.
sum=$(db_sum)
LAST_CMD="setsid -w vault passwd (VAULT_PASSPHRASE_FILE set, no VAULT_NEW_PASSPHRASE_FILE)"
setsid -w "$VAULT" passwd </dev/null >"$T/out" 2>"$T/err"
RC=$?
expect_rc 1 "passwd without a new passphrase source"
expect_err "VAULT_NEW_PASSPHRASE_FILE" "passwd without a new passphrase source"
expect_db "$sum" "passwd without a new passphrase source"

cp "$T/pass" "$T/pass644"
chmod 644 "$T/pass644"
VAULT_PASSPHRASE_FILE=$T/pass644 refuse 1 "passphrase file" /dev/null list
chmod 640 "$T/pass644"
VAULT_PASSPHRASE_FILE=$T/pass644 refuse 1 "chmod 600" "$GOOD" add p1 --host p.example.com
VAULT_PASSPHRASE_FILE=$T/no-such-file refuse 1 "passphrase file" /dev/null list
VAULT_PASSPHRASE_FILE=$T refuse 1 "passphrase file" /dev/null list
write_private "$T/emptypass" ""
VAULT_PASSPHRASE_FILE=$T/emptypass refuse 1 "empty passphrase" /dev/null list
VAULT_HOME=$T/fresh2 VAULT_PASSPHRASE_FILE=$T/emptypass refuse 1 "empty passphrase" /dev/null \
	init --kdf interactive
check "init with an empty passphrase creates no vault" test ! -e "$T/fresh2/vault.db"
write_private "$T/newpass" "new-$(rand_secret)"
VAULT_NEW_PASSPHRASE_FILE=$T/emptypass refuse 1 "empty passphrase" /dev/null passwd
head -c 3000 /dev/zero | tr '\0' p >"$T/longpass"
chmod 600 "$T/longpass"
VAULT_PASSPHRASE_FILE=$T/longpass refuse 1 "too large" /dev/null list
VAULT_NEW_PASSPHRASE_FILE=$T/pass644 refuse 1 "passphrase file" /dev/null passwd

write_private "$T/wrongpass" "wrong-$(rand_secret)"
VAULT_PASSPHRASE_FILE=$T/wrongpass refuse 1 "cannot decrypt" /dev/null list
VAULT_PASSPHRASE_FILE=$T/wrongpass refuse 1 "wrong passphrase" "$GOOD" add w1 --host w.example.com
VAULT_PASSPHRASE_FILE=$T/wrongpass refuse 1 "cannot decrypt" /dev/null rm first
VAULT_PASSPHRASE_FILE=$T/wrongpass VAULT_NEW_PASSPHRASE_FILE=$T/newpass \
	refuse 1 "cannot decrypt" /dev/null passwd
# Only the first line counts: the right passphrase on line two does not open it.
printf 'wrong\n%s\n' "$PASS" >"$T/line2"
chmod 600 "$T/line2"
VAULT_PASSPHRASE_FILE=$T/line2 refuse 1 "cannot decrypt" /dev/null list

# ---- VAULT_HOME ----

# An existing VAULT_HOME open to others: init refuses it rather than use or fix it.
mkdir -m 755 "$T/public"
VAULT_HOME=$T/public refuse 1 "insecure path" /dev/null init --kdf interactive
check "init left the public dir alone: no vault.db" test ! -e "$T/public/vault.db"
check "init left the public dir's mode 0755" test "$(stat -c %a "$T/public")" = 755

mkdir -m 700 "$T/cwd"
cd "$T/cwd" || exit 1
for home in relative/vrun ./vrun vrun ''; do
	VAULT_HOME=$home refuse 1 "absolute" /dev/null list
	VAULT_HOME=$home refuse 1 "absolute" /dev/null init --kdf interactive
done
cd - >/dev/null || exit 1
check "a relative VAULT_HOME creates nothing" test -z "$(ls -A "$T/cwd")"

# After all of that the vault still holds exactly the two keys.
run list --json
expect_rc 0 "list after all the refusals"
expect_json '[e["name"] for e in j] == ["first", "a-b"]' "the vault holds exactly first and a-b"

finish
