#!/usr/bin/env bash
# quickstart.sh — the README's quick start works as written. The blocks
# marked `<!-- quickstart: run -->` in README.md are extracted and run
# verbatim, each with bash on a pseudo-terminal (quickstart.py), answering
# the passphrase prompts as a person would: `vault init` asks twice, `echo
# ... | vault add` and `vault list` ask on the terminal although the secret
# comes from a pipe, `vproxy start` asks once and detaches (the daemon
# outlives its terminal, without one), `vrun --check` passes, the deploy
# script sees the placeholder while the stand-in for httpbin.org receives the
# real key and answers "authenticated": true, the token comes back as the
# placeholder, example.com is refused, and `vault audit`, `--summary` and
# `verify` show what happened. The key and the passphrase never appear on
# the terminal.
#
# What differs from a person's machine, on purpose and nothing else:
#   1. the `quickstart: install` block (./setup, cmake --install) is not
#      run: this build's vault, vproxy and vrun come first in PATH, and
#      VRUN_PROFILE_DIR names the source tree's profiles;
#   2. httpbin.org is a local stand-in: `vproxy start` becomes
#      `vproxy start --resolve httpbin.org:443:127.0.0.1`, and SSL_CERT_FILE
#      names a CA made here, which vproxy then trusts for upstreams (vrun
#      sets the command's own SSL_CERT_FILE, as always);
#   3. HOME is a scratch directory (the vault lands in its default place,
#      ~/.local/share/vrun); VAULT_HOME, XDG_DATA_HOME and XDG_RUNTIME_DIR
#      are unset;
#   4. everything runs in a private network namespace (`unshare --net`,
#      with --map-root-user when not root) where only lo exists: the real
#      httpbin.org cannot be reached, and the stand-in can listen on 443.
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"
need python3 openssl unshare curl bash

README="$SRC/README.md"
Q="$T/qs"
mkdir -p "$Q" "$T/bin" "$T/user" "$T/work" "$T/ca"

# ---- the stand-in's certificate, from a CA made now ----

(
	cd "$T/ca" &&
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj "/CN=vrun quickstart test CA" -keyout ca.key -out ca.pem \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=httpbin.org" -keyout leaf.key -out leaf.csr &&
		printf 'subjectAltName=DNS:httpbin.org\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >leaf.ext &&
		openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
			-extfile leaf.ext -out leaf.pem
) >"$T/out" 2>"$T/err"
RC=$?
LAST_CMD="openssl: a CA and a certificate for httpbin.org"
expect_rc 0 "a test CA and a certificate for the stand-in"
[ "$RC" -eq 0 ] || finish

# ---- the environment of the quick start (see the header) ----

ln -s "$VAULT" "$T/bin/vault"
ln -s "$VPROXY" "$T/bin/vproxy"
ln -s "$VRUN" "$T/bin/vrun"
chmod 700 "$T/user"
PASSPHRASE="qs-$(rand_secret)"
write_private "$Q/passphrase" "$PASSPHRASE"
SECRET=not-a-real-key-123 # the README's made-up key
QS_HOME="$T/user"
qs_env() {
	env -u VAULT_HOME -u VAULT_PASSPHRASE_FILE -u VAULT_NEW_PASSPHRASE_FILE \
		-u XDG_DATA_HOME -u XDG_RUNTIME_DIR -u NO_COLOR \
		HOME="$QS_HOME" PATH="$T/bin:$PATH" SSL_CERT_FILE="$T/ca/ca.pem" TERM=dumb "$@"
}
# Whatever happens, no daemon outlives the test.
trap 'qs_env "$VPROXY" stop >/dev/null 2>&1; "$VPROXY" stop >/dev/null 2>&1; cleanup' EXIT

# Root may lack CAP_SYS_ADMIN (a container): then a user namespace, as for anyone.
if [ "$(id -u)" -eq 0 ] && unshare --net true 2>/dev/null; then
	NS=(unshare --net)
else
	NS=(unshare --net --map-root-user)
fi
qs_env "${NS[@]}" python3 "$SRC/tests/cli/quickstart.py" "$README" "$Q" "$T/work" \
	"$T/ca/leaf.pem" "$T/ca/leaf.key" </dev/null >"$T/out" 2>"$T/err"
RC=$?
LAST_CMD="${NS[*]} quickstart.py"
expect_rc 0 "the driver ran"
cp "$T/err" "$T/driver.err"

# ---- the blocks and the substitution ----

sed 's/^/#   /' "$Q/blocks" 2>/dev/null
check "README has one quickstart: install block" test "$(grep -c '^install ' "$Q/blocks")" -eq 1
check "README has four quickstart: run blocks" test "$(grep -c '^run ' "$Q/blocks")" -eq 4
sed 's/^/#   substituted: /' "$Q/substitutions" 2>/dev/null
check "exactly one substitution: vproxy start --resolve" \
	test "$(cat "$Q/substitutions" 2>/dev/null)" = "vproxy start  ->  vproxy start --resolve httpbin.org:443:127.0.0.1"

# transcript N: block N's terminal output without CR and colour, for grep.
for n in 1 2 3 4; do
	[ -f "$Q/block-$n.out" ] || continue
	sed 's/\r$//; s/\x1b\[[0-9;]*m//g' "$Q/block-$n.out" >"$Q/block-$n.txt"
done

# block N DESC: block N ran and exited 0; shows its transcript if not.
block() {
	local rc
	rc=$(cat "$Q/block-$1.rc" 2>/dev/null || echo "not run")
	if [ "$rc" = 0 ]; then
		ok "block $1 ($2) ran on a terminal and succeeded"
	else
		not_ok "block $1 ($2): exit status $rc"
		sed 's/^/#   | /' "$Q/block-$1.sh" 2>/dev/null
		sed 's/^/#   > /' "$Q/block-$1.txt" 2>/dev/null | tail -40
	fi
}

# says N TEXT DESC: block N's transcript has fixed TEXT.
says() {
	if grep -qF -- "$2" "$Q/block-$1.txt" 2>/dev/null; then
		ok "$3: the terminal shows '$2'"
	else
		not_ok "$3: the terminal lacks '$2'"
		sed 's/^/#   > /' "$Q/block-$1.txt" 2>/dev/null | tail -25
	fi
}

# prompts N WANT DESC: block N asked exactly these prompts (one per line).
prompts() {
	local got
	got=$(cat "$Q/block-$1.prompts" 2>/dev/null)
	if [ "$got" = "$2" ]; then
		ok "$3: asked $(printf '%s' "$2" | grep -c .) time(s) on the terminal"
	else
		not_ok "$3: expected prompts [$(printf '%s' "$2" | tr '\n' ',')], got [$(printf '%s' "$got" | tr '\n' ',')]"
	fi
}

# ---- 2. the vault and a key ----

block 1 "vault init, echo | vault add, vault list"
prompts 1 "New vault passphrase:
Repeat passphrase:
Vault passphrase:
Vault passphrase:" "vault init twice, then vault add and vault list once each"
says 1 "vault: added 'demo-key'" "echo ... | vault add"
check "vault list shows demo-key bound to httpbin.org:443" \
	grep -qE '^demo-key +placeholder +DEMO_KEY +httpbin\.org:443$' "$Q/block-1.txt"
check "the vault is in its default place under HOME" test -f "$QS_HOME/.local/share/vrun/vault.db"

# ---- 3. vproxy start, vrun --check ----

block 2 "vproxy start, vrun --check"
prompts 2 "Vault passphrase:" "vproxy start"
says 2 "vproxy: started (pid " "vproxy start"
says 2 "vrun --check: all checks passed" "vrun --check"
daemon=$(cat "$Q/daemon" 2>/dev/null)
echo "#   daemon after its terminal closed: ${daemon:-?}"
check "vproxy detached: it runs on after its terminal is gone" grep -qE '^pid [0-9]+: state [RSD]' "$Q/daemon"
check "vproxy detached: own session, no controlling terminal" grep -q 'own session yes, controlling tty 0$' "$Q/daemon"

# ---- 4. the deploy script under vrun ----

block 3 "deploy.sh under vrun"
prompts 3 "" "vrun and the script"
says 3 "vrun: key 'demo' is 'demo-key'" "vrun --key demo"
ph=$(sed -n 's/^the script sees DEMO_KEY=\([^ ]*\)$/\1/p' "$Q/block-3.txt" 2>/dev/null | head -1)
check "the script sees a placeholder in DEMO_KEY (${ph:-none})" test -n "$ph" -a "$ph" != "$SECRET"
says 3 '"authenticated": true' "httpbin.org's answer"
check "the token comes back as the placeholder" grep -qF "\"token\": \"$ph\"" "$Q/block-3.txt"
says 3 "example.com refused: not a bound host" "the request to example.com"
check "the stand-in got exactly one request: GET /bearer with the real key" python3 -c '
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(not (len(rs) == 1 and rs[0]["path"] == "/bearer" and rs[0]["host"] == "httpbin.org"
              and rs[0]["authorization"] == "Bearer " + sys.argv[2]))' "$Q/server.log" "$SECRET"

# ---- 5. the audit, verify, stop ----

block 4 "vault audit, --summary, verify, vproxy stop"
prompts 4 "Vault passphrase:" "only vault audit verify"
check "vault audit shows the allowed request to httpbin.org" \
	grep -qE 'request +demo-key +GET +httpbin\.org +200 +allowed +/bearer' "$Q/block-4.txt"
check "vault audit shows the refused CONNECT to example.com" grep -qE ' example\.com +403 +denied ' "$Q/block-4.txt"
check "vault audit names deploy.sh on the request rows" grep -qE '\./deploy\.sh +request ' "$Q/block-4.txt"
check "vault audit --summary: the deploy session, 2 requests, 1 denied" \
	grep -qE '^[0-9a-f]{16} .* 2 +1 .*\./deploy\.sh$' "$Q/block-4.txt"
says 4 "intact: " "vault audit verify"
runp qs_env "$VPROXY" status
expect_rc 3 "vproxy stop stopped it"

# ---- never on the terminal ----

cat "$Q"/block-*.out >"$T/all.out" 2>/dev/null
expect_not "$SECRET" "$T/all.out" "the key never appears on the terminal"
expect_not "$PASSPHRASE" "$T/all.out" "the passphrase never appears on the terminal"

[ -s "$T/driver.err" ] && sed 's/^/#   driver: /' "$T/driver.err"
finish
