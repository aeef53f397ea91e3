#!/usr/bin/env bash
# audit.sh — the "Audit log" design and `vault audit`: records written the way
# vproxy writes them (with tests/unit/audit_writer_tool, which uses the vault's
# audit key) are shown as a table, filtered (--session, --key, --since,
# --denied, combined), printed raw (--json, byte for byte), summarised per
# session, and followed while they are appended, across rotation; each row
# names its session's command. The table shows the last 50 matching records
# (filters first), -n/--limit N the last N, --all every one; --json every
# record unless -n is given; --summary -n counts sessions. Output that
# is not a terminal, or with NO_COLOR, has no escape codes, and escape codes in
# records never reach the terminal. `vault audit verify` says intact, and
# after an edited byte, a deleted, swapped, duplicated or cut line, a removed
# hmac, a line cut from the start or a record under another key, exits 1 with
# the file and line of the first bad record. No secret from a request's query
# ever appears in the log or the output. Damaged lines are warned about, not
# fatal, in the table view.
. "$(dirname "$0")/lib.sh" "$@"
need timeout date

TOOL=${AUDIT_TOOL:-$(dirname "$VAULT")/../tests/unit/audit_writer_tool}
if [ ! -x "$TOOL" ]; then
	not_ok "audit_writer_tool not found at $TOOL: build it, or set AUDIT_TOOL"
	finish
fi
LOG=$VAULT_HOME/audit.log
SECRET="sk-$(rand_secret)"

# write_records [--rotate BYTES]: the JSON lines on stdin into the log.
write_records() {
	if ! "$TOOL" "$@" >"$T/tool.out" 2>&1; then
		not_ok "setup: audit_writer_tool $* failed"
		sed 's/^/#   /' "$T/tool.out"
	fi
}

# rows: data rows of the last table (stdout minus the header).
rows() {
	tail -n +2 "$T/out" | wc -l
}

# expect_rows N DESC: the table printed N records.
expect_rows() {
	local n
	n=$(rows)
	if [ "$n" -eq "$1" ]; then ok "$2: $1 rows"; else not_ok "$2: $n rows, expected $1"; dump_last; fi
}

# expect_lines N DESC: stdout has N lines, each a JSON object (JSON Lines).
expect_lines() {
	if python3 -c '
import json, sys
lines = open(sys.argv[1], "rb").read().splitlines()
assert len(lines) == int(sys.argv[2]), len(lines)
for l in lines:
    assert isinstance(json.loads(l), dict)
' "$T/out" "$1" 2>"$T/pyerr"; then
		ok "$2: $1 JSON lines"
	else
		not_ok "$2: not $1 JSON lines"
		sed 's/^/#   python: /' "$T/pyerr"
		dump_last
	fi
}

# expect_jsonl PYEXPR DESC: PYEXPR holds for every record r on stdout.
expect_jsonl() {
	if python3 -c '
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1], "rb").read().splitlines()]
sys.exit(0 if rs and all(eval(sys.argv[2]) for r in rs) else 1)
' "$T/out" "$1" 2>"$T/pyerr"; then
		ok "$2"
	else
		not_ok "$2: not for every record: $1"
		sed 's/^/#   python: /' "$T/pyerr"
		dump_last
	fi
}

expect_no_escape() {
	if LC_ALL=C grep -q $'\033' "$T/out"; then
		not_ok "$1: escape codes on stdout"
		dump_last
	else
		ok "$1: no escape codes"
	fi
}

# ---- nothing yet ----

run audit
expect_rc 0 "audit without VAULT_HOME"
expect_err "no audit records yet" "audit without VAULT_HOME"
expect_no_out "audit without VAULT_HOME"
run audit verify
expect_rc 1 "verify without a vault"
expect_err "no vault yet" "verify without a vault"
init_vault
run audit verify
expect_rc 0 "verify without a log"
expect_out "intact: 0 records in 0 files" "verify without a log"
run audit --bogus
expect_rc 2 "unknown audit option"
run audit verify --json
expect_rc 2 "verify takes no filters"
run audit --summary --follow
expect_rc 2 "--summary with --follow"
run audit --since yesterday
expect_rc 2 "--since yesterday"
expect_err "--since" "--since yesterday"

# ---- sample records: an old session, a recent one ----

S1=a1b2c3d4e5f60718
S2=0f1e2d3c4b5a6978
OLD=$(date -u -d '3 days ago' +%Y-%m-%dT%H:%M:%S.000Z)
NOW=$(date -u +%Y-%m-%dT%H:%M:%S.000Z)
DAYAGO=$(date -u -d '1 day ago' +%Y-%m-%dT%H:%M:%SZ)
req() { # session at key method host port target status decision reason
	printf '{"type":"request","session":"%s","at":"%s","fields":{"key":%s,"method":"%s","host":"%s","port":%s,"target":"%s","status":%s,"bytes_up":100,"bytes_down":2048,"duration_ms":12,"decision":"%s","reason":"%s","injected":true,"scrubbed":0}}\n' "$@"
}
{
	printf '{"type":"session_start","session":"%s","at":"%s","fields":{"pid":100,"uid":1000,"command":"./deploy.sh --prod","cwd":"/srv/app","keys":["deploy-key"],"profile":"default","allow_hosts":[]}}\n' $S1 "$OLD"
	req $S1 "$OLD" '"deploy-key"' GET api.example.com 443 "/v1/items?page=2&api_key=$SECRET" 200 allowed "key bound"
	req $S1 "$OLD" null CONNECT evil.example.com 443 "evil.example.com:443" 403 denied "host not bound"
	printf '{"type":"session_end","session":"%s","at":"%s","fields":{"exit":0,"requests":2,"denied":1,"bytes_up":200,"bytes_down":4096,"duration_ms":3000}}\n' $S1 "$OLD"
	printf '{"type":"session_start","session":"%s","at":"%s","fields":{"pid":200,"uid":1000,"command":"git push \\u001b[2J\\u009b31m","cwd":"/srv/repo","keys":["gh"],"profile":null,"allow_hosts":["pypi.org"]}}\n' $S2 "$NOW"
	req $S2 "$NOW" '"gh"' POST github.com 443 "/repos/x/y/git-receive-pack?service=$SECRET" 200 allowed "key bound"
	req $S2 "$NOW" '"gh"' DELETE github.com 443 "/repos/x/y" 403 denied "method not allowed"
	req $S2 "$NOW" '"gh"' GET uploads.github.com 8443 "/" 201 allowed "key bound"
	printf '{"type":"session_end","session":"%s","at":"%s","fields":{"exit":1,"requests":3,"denied":1,"bytes_up":300,"bytes_down":6144,"duration_ms":900}}\n' $S2 "$NOW"
} >"$T/recs"
write_records <"$T/recs"
cp "$LOG" "$T/good.log"

check "the log is mode 0600" test "$(stat -c %a "$LOG")" = 600
if grep -qF -- "$SECRET" "$LOG"; then not_ok "the secret is in audit.log"; else ok "the secret from the query is not in audit.log"; fi

# ---- the table ----

run audit
expect_rc 0 "audit"
expect_rows 9 "audit"
expect_out "TIME (UTC)" "audit"
expect_out "./deploy.sh --prod" "audit shows the command"
expect_out "/v1/items?page=&api_key=" "audit shows the path without query values"
expect_out "evil.example.com" "audit"
expect_out "(host not bound)" "audit shows why a request was denied"
expect_out "uploads.github.com:8443" "audit shows a non-default port"
expect_out "${S1:0:8} " "audit shows short session ids"
expect_out "git push ?[2J?31m" "C0 and C1 controls in records are shown as '?'"
expect_no_escape "audit to a file"
if grep -qF -- "$SECRET" "$T/out"; then not_ok "the secret is in the output"; else ok "the secret is not in the output"; fi

run audit --json
expect_rc 0 "audit --json"
check "audit --json prints the stored lines byte for byte" cmp -s "$T/out" "$LOG"
expect_lines 9 "audit --json"
expect_no_escape "audit --json"

# ---- filters ----

run audit --denied --json
expect_lines 2 "--denied"
expect_jsonl 'r["decision"] == "denied"' "--denied: only denied requests"
run audit --denied
expect_rows 2 "--denied table"
run audit --session "${S1:0:6}" --json
expect_lines 4 "--session prefix"
expect_jsonl "r['session'] == '$S1'" "--session: only that session"
run audit --session "$S2" --denied --json
expect_lines 1 "--session and --denied combine"
expect_jsonl 'r["method"] == "DELETE"' "--session and --denied combine"
run audit --key gh --json
expect_lines 4 "--key gh: the session that holds it and its requests"
expect_jsonl 'r.get("key") == "gh" or "gh" in r.get("keys", [])' "--key gh"
run audit --key deploy-key --denied
expect_rc 0 "--key deploy-key --denied"
expect_err "no matching audit records" "--key deploy-key --denied"
run audit --since 1h --json
expect_lines 5 "--since 1h"
expect_jsonl "r['session'] == '$S2'" "--since 1h: only the recent session"
run audit --since 4d --json
expect_lines 9 "--since 4d"
run audit --since 90m --session "$S1"
expect_rc 0 "--since 90m --session S1"
expect_err "no matching audit records" "--since 90m --session S1"
run audit --since "$DAYAGO" --json
expect_lines 5 "--since an RFC 3339 time"
run audit --since "$(date -u -d '4 days ago' +%Y-%m-%d)" --json
expect_lines 9 "--since a date"

# ---- the session's command on every row ----

# The column is 16 characters: "./deploy.sh --prod" is cut to 13 and "...".
run audit --session "$S1"
check "a request row names its session's command" \
	grep -qE "^[^ ]+ ${S1:0:8} \./deploy\.sh -\.\.\. request +deploy-key +GET " "$T/out"
check "so does the end row" grep -qE "^[^ ]+ ${S1:0:8} \./deploy\.sh -\.\.\. end " "$T/out"
run audit --denied --session "$S2"
check "also when the session's start is filtered out; controls shown as '?'" \
	grep -qE "^[^ ]+ ${S2:0:8} git push \?\[2J\.\.\. request " "$T/out"

# ---- summary ----

run audit --summary
expect_rc 0 "--summary"
expect_rows 2 "--summary"
expect_out "$S1" "--summary shows the full session id"
expect_out "api.example.com,evil.example.com" "--summary lists the hosts"
run audit --summary --json
expect_lines 2 "--summary --json"
expect_jsonl 'r["requests"] == (2 if r["session"] == "'$S1'" else 3) and r["denied"] == 1' \
	"--summary counts requests and denials per session"
expect_jsonl 'r["session"] != "'$S2'" or (r["hosts"] == ["github.com", "uploads.github.com:8443"] and r["bytes_up"] == 300 and r["exit"] == 1)' \
	"--summary: hosts, bytes and exit of a session"

# ---- colour only on a terminal, and never with NO_COLOR ----

# on_pty [NO_COLOR]: vault audit with stdout on a pseudo-terminal, into $T/out.
on_pty() {
	python3 - "$VAULT" "$@" >"$T/out" 2>"$T/pyerr" <<'EOF'
import os, subprocess, sys
env = dict(os.environ)
env.pop("NO_COLOR", None)
if len(sys.argv) > 2:
    env["NO_COLOR"] = sys.argv[2]
m, s = os.openpty()
p = subprocess.Popen([sys.argv[1], "audit"], stdin=subprocess.DEVNULL, stdout=s,
                     stderr=subprocess.DEVNULL, env=env)
os.close(s)
out = b""
while True:
    try:
        d = os.read(m, 65536)
    except OSError:
        break
    if not d:
        break
    out += d
sys.exit(p.wait() or sys.stdout.buffer.write(out) and 0)
EOF
}
on_pty
if LC_ALL=C grep -q $'\033\\[31m' "$T/out" && grep -qF "(host not bound)" "$T/out"; then
	ok "denied requests are red on a terminal"
else
	not_ok "no colour on a terminal"
	sed 's/^/#   /' "$T/pyerr" "$T/out" | head -20
fi
if [ "$(LC_ALL=C grep -c $'\033' "$T/out")" -eq 2 ]; then
	ok "only the two denied rows are coloured; the record's own escapes are not passed"
else
	not_ok "unexpected escape codes on the terminal"
	LC_ALL=C grep -n $'\033' "$T/out" | cat -v | head
fi
on_pty 1
if grep -qF "(host not bound)" "$T/out"; then ok "NO_COLOR: the table still shows"; else not_ok "NO_COLOR: no table"; fi
expect_no_escape "NO_COLOR on a terminal"
# no-color.org: only a non-empty NO_COLOR counts.
on_pty ""
if LC_ALL=C grep -q $'\033\\[31m' "$T/out"; then
	ok "an empty NO_COLOR is ignored: still colour on a terminal"
else
	not_ok "an empty NO_COLOR turned colour off"
fi

# ---- verify ----

run audit verify
expect_rc 0 "verify"
expect_out "intact: 9 records in 1 file" "verify"

write_private "$T/wrongpass" "wrong-$(rand_secret)"
VAULT_PASSPHRASE_FILE=$T/wrongpass run audit verify
expect_rc 1 "verify with a wrong passphrase"
expect_err "cannot decrypt vault" "verify with a wrong passphrase"

# tampered NAME LINE TEXT: audit.log from $T/v/NAME fails verify at LINE saying TEXT,
# and the table view still works.
tampered() {
	cat "$T/v/$1" >"$LOG"
	run audit verify
	if [ "$RC" -eq 1 ] && grep -qF -- "audit.log:$2: $3" "$T/err"; then
		ok "verify finds $1 at line $2 ($3)"
	else
		not_ok "verify of $1: expected exit 1 and 'audit.log:$2: $3'"
		dump_last
	fi
	run audit
	expect_rc 0 "the table of a log with $1"
}

mkdir "$T/v"
python3 - "$T/good.log" "$T/v" <<'EOF'
import hashlib, hmac, os, sys
good = open(sys.argv[1], "rb").read()
out = sys.argv[2]
L = good.split(b"\n")[:-1]
def put(name, lines, end=b"\n"):
    open(os.path.join(out, name), "wb").write(b"\n".join(lines) + end)
put("edited", L[:5] + [L[5].replace(b'"POST"', b'"PUTS"')] + L[6:])
put("edited-time", L[:1] + [L[1].replace(b'"time":"2', b'"time":"1')] + L[2:])
put("deleted", L[:2] + L[3:])
put("deleted-first", L[1:])
put("swapped", L[:3] + [L[4], L[3]] + L[5:])
put("duplicated", L[:2] + [L[1]] + L[2:])
put("replayed-last", L + [L[-1]])
open(os.path.join(out, "cut"), "wb").write(good[:-20])
open(os.path.join(out, "no-newline"), "wb").write(good[:-1])
put("no-hmac", L[:6] + [L[6][:-75] + b"}"] + L[7:])
put("other-hmac", L[:6] + [L[6][:-66] + L[7][-66:]] + L[7:])
put("garbage", L[:3] + [b"not a record"] + L[3:])
# A record forged without the key: right seq and prev, HMAC under a guessed key.
rec = L[8][:-75].replace(b'"exit":1', b'"exit":0') + b"}"
put("forged", L[:8] + [L[8][:-75].replace(b'"exit":1', b'"exit":0') + b',"hmac":"' +
                       hmac.new(os.urandom(32), rec, hashlib.sha256).hexdigest().encode() + b'"}'])
EOF
tampered edited 6 "hmac mismatch"
tampered edited-time 2 "hmac mismatch"
tampered deleted 3 "seq gap"
tampered deleted-first 1 "the log starts after seq 1"
tampered swapped 4 "seq gap"
tampered duplicated 3 "seq repeated"
tampered replayed-last 10 "seq repeated"
tampered cut 9 "truncated line"
expect_err "warning: audit.log:9: incomplete last line skipped" "the table of a cut log"
expect_rows 8 "the table of a cut log"
tampered no-newline 9 "truncated line"
tampered no-hmac 7 "no hmac"
tampered other-hmac 7 "hmac mismatch"
tampered forged 9 "hmac mismatch"
tampered garbage 4 "malformed record"
expect_err "warning: audit.log:4: malformed record skipped" "the table of a log with garbage"
expect_rows 9 "the table of a log with garbage"
cat "$T/good.log" >"$LOG"

# ---- the log must be private ----

chmod 644 "$LOG"
run audit
expect_rc 1 "audit of a world-readable log"
expect_err "refusing insecure path" "audit of a world-readable log"
chmod 600 "$LOG"
mv "$LOG" "$T/elsewhere.log"
ln -s "$T/elsewhere.log" "$LOG"
run audit verify
expect_rc 1 "verify of a symlinked log"
expect_err "refusing insecure path" "verify of a symlinked log"
rm "$LOG"
mv "$T/elsewhere.log" "$LOG"

# ---- follow, across rotation ----

S3=5e55104b33330003
rec3() {
	printf '{"type":"request","session":"%s","fields":{"key":"gh","method":"GET","host":"github.com","port":443,"target":"/follow/%s","status":200,"bytes_up":1,"bytes_down":1,"duration_ms":1,"decision":"allowed","reason":"key bound","injected":true,"scrubbed":0}}\n' $S3 "$1"
}
# wait_for FILE TEXT: up to 10 s for TEXT to show up in FILE.
wait_for() {
	local _
	for _ in $(seq 100); do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
timeout 20 "$VAULT" audit --follow >"$T/follow.out" 2>"$T/follow.err" </dev/null &
FOLLOW=$!
if wait_for "$T/follow.out" "${S2:0:8}"; then ok "--follow prints the records already there"; else not_ok "--follow printed nothing"; fi
rec3 one | write_records
if wait_for "$T/follow.out" "/follow/one"; then ok "--follow shows a record appended meanwhile"; else not_ok "--follow missed an appended record"; fi
# Every record now goes to a fresh file: three rotations between two polls at most.
{ rec3 two; rec3 three; rec3 four; } | write_records --rotate 1
if wait_for "$T/follow.out" "/follow/four"; then
	ok "--follow goes on after rotations"
else
	not_ok "--follow stopped at a rotation"
fi
kill "$FOLLOW" 2>/dev/null
wait "$FOLLOW" 2>/dev/null
n=$(grep -c "/follow/" "$T/follow.out")
if [ "$n" -eq 4 ] && grep -A1 "/follow/two" "$T/follow.out" | grep -qF "/follow/three"; then
	ok "--follow: each appended record once, in order"
else
	not_ok "--follow: $n follow records"
	sed 's/^/#   /' "$T/follow.out" "$T/follow.err"
fi
expect_no_escape_file() { ! LC_ALL=C grep -q $'\033' "$1"; }
check "--follow to a file has no escape codes" expect_no_escape_file "$T/follow.out"

run audit verify
expect_rc 0 "verify across rotated files"
expect_out "intact: 13 records in 4 files" "verify across rotated files"
run audit --session "$S3" --json
expect_lines 4 "the table reads rotated files too"
# Tampering in a rotated file is reported with its name.
sed -i 's/"GET"/"PUT"/' "$LOG.2"
run audit verify
expect_rc 1 "verify of an edited rotated file"
expect_err "audit.log.2:1: hmac mismatch" "verify of an edited rotated file"

# ---- the last records by default: -n, --limit, --all ----

# A fresh log: an old session with a key of its own and a denied request,
# then a long one: 1 + 4 + 1 + 1 + 60 + 1 = 68 records.
export VAULT_HOME="$T/home-limit"
LOG=$VAULT_HOME/audit.log
init_vault
S4=4444444444444444
S5=5555555555555555
{
	printf '{"type":"session_start","session":"%s","at":"%s","fields":{"pid":1,"uid":1000,"command":"old-job","cwd":"/","keys":["old-key"],"profile":null,"allow_hosts":[]}}\n' $S5 "$OLD"
	req $S5 "$OLD" '"old-key"' GET old.example.com 443 /old/1 200 allowed "key bound"
	req $S5 "$OLD" '"old-key"' GET old.example.com 443 /old/2 200 allowed "key bound"
	req $S5 "$OLD" null CONNECT evil.example.com 443 evil.example.com:443 403 denied "host not bound"
	req $S5 "$OLD" '"old-key"' GET old.example.com 443 /old/3 200 allowed "key bound"
	printf '{"type":"session_end","session":"%s","at":"%s","fields":{"exit":0,"requests":4,"denied":1,"bytes_up":0,"bytes_down":0,"duration_ms":1}}\n' $S5 "$OLD"
	printf '{"type":"session_start","session":"%s","at":"%s","fields":{"pid":2,"uid":1000,"command":"python3 scripts/deploy.py --env production","cwd":"/","keys":["deploy-key"],"profile":null,"allow_hosts":[]}}\n' $S4 "$NOW"
	for i in $(seq 1 60); do
		req $S4 "$NOW" '"deploy-key"' GET api.example.com 443 "/r/$i" 200 allowed "key bound"
	done
	printf '{"type":"session_end","session":"%s","at":"%s","fields":{"exit":0,"requests":60,"denied":0,"bytes_up":0,"bytes_down":0,"duration_ms":1}}\n' $S4 "$NOW"
} >"$T/recs-limit"
write_records <"$T/recs-limit"

run audit
expect_rc 0 "audit of 68 records"
expect_rows 50 "audit shows the last 50 by default"
expect_err "showing the last 50 of 68 matching records; --all shows every one" "audit says what it left out"
check "the last 50: /r/12 through the end record" \
	sh -c "grep -q ' /r/12\$' '$T/out' && ! grep -q ' /r/11\$' '$T/out' && tail -1 '$T/out' | grep -q ' end '"
check "a long command is cut to its column with '...'" \
	grep -qE "^[^ ]+ ${S4:0:8} python3 scrip\.\.\. request .* /r/60\$" "$T/out"
run audit -n 5
expect_rows 5 "audit -n 5"
expect_err "showing the last 5 of 68 matching records" "audit -n 5"
run audit --limit 5
expect_rows 5 "audit --limit 5"
run audit --all
expect_rows 68 "audit --all"
check "audit --all: no note on stderr" test ! -s "$T/err"
run audit --json
expect_lines 68 "audit --json: every record by default (scripts)"
check "audit --json: no note on stderr" test ! -s "$T/err"
run audit --json -n 3
check "audit --json -n 3: the last 3 stored lines, byte for byte" cmp -s "$T/out" <(tail -n 3 "$LOG")
# Filters first, then the limit: the old session is far beyond the last 50.
run audit --key old-key
expect_rows 4 "--key old-key finds the old session's start and its three requests"
run audit --denied
expect_rows 1 "--denied finds the old denied request"
expect_out "evil.example.com" "--denied finds the old denied request"
run audit --session "$S5" -n 2
expect_rows 2 "--session then -n 2"
check "--session then -n 2: the session's last two records" \
	sh -c "grep -q ' /old/3\$' '$T/out' && tail -1 '$T/out' | grep -q ' end '"
run audit --summary -n 1
expect_rows 1 "--summary -n 1: the last session"
expect_out "$S4" "--summary -n 1"
expect_err "showing the last 1 of 2 matching sessions" "--summary -n 1"
run audit --summary --json -n 1
expect_lines 1 "--summary --json -n 1"
for bad in "-n 0" "-n x" "-n 5x" "-n -3" "--limit=" "--all -n 3" "-n"; do
	# shellcheck disable=SC2086
	run audit $bad
	expect_rc 2 "audit $bad"
done

# --follow -n 3: the last three, then each new one.
timeout 20 "$VAULT" audit --follow -n 3 >"$T/follow.out" 2>"$T/follow.err" </dev/null &
FOLLOW=$!
if wait_for "$T/follow.out" "/r/60"; then ok "--follow -n 3 prints the last records"; else not_ok "--follow -n 3 printed nothing"; fi
req $S4 "$NOW" '"deploy-key"' GET api.example.com 443 /r/61 200 allowed "key bound" | write_records
if wait_for "$T/follow.out" "/r/61"; then ok "--follow -n 3 then shows a new record"; else not_ok "--follow -n 3 missed a new record"; fi
kill "$FOLLOW" 2>/dev/null
wait "$FOLLOW" 2>/dev/null
check "--follow -n 3: /r/59, /r/60, the end, then /r/61; nothing older" \
	test "$(grep -oE '/r/[0-9]+$| end ' "$T/follow.out" | tr '\n' ' ')" = "/r/59 /r/60  end  /r/61 "

finish
