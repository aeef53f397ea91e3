#!/usr/bin/env bash
# service.sh — vproxy as a background service. `vproxy start` daemonizes
# with a pid file (runtime directory) and a log file ($VAULT_HOME/vproxy.log),
# both 0600 and owned by the user, and the log holds start and stop but never
# the secret or the passphrase; an insecure log is refused and a large one is
# rotated. `vproxy status` shows pid, uptime, key names and the live sessions
# with their command and request count, also as --json and --keys; stop
# removes the pid file. `start --foreground` speaks systemd's notify
# protocol. The systemd user unit passes `systemd-analyze verify` (skipped,
# with a note, where systemd-analyze is missing).
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"
need python3 curl

make_vault
RUNDIR="$VAULT_HOME/run" # no XDG_RUNTIME_DIR in the tests
PIDFILE="$RUNDIR/vproxy.pid"
LOG="$VAULT_HOME/vproxy.log"

# ---- an insecure log file is refused, before anything starts ----

(umask 022 && : >"$LOG")
chmod 644 "$LOG"
runp "$VPROXY" start
expect_rc 1 "start with a world-readable log file"
expect_err "vproxy.log" "the refusal names the log file"
expect_err "chmod" "the refusal says how to fix it"
check "no pid file after a refused start" test ! -e "$PIDFILE"
rm -f "$LOG"

# A log past 1 MiB is kept as vproxy.log.1 and a new one begins.
(umask 077 && head -c 1100000 /dev/zero | tr '\0' 'x' >"$LOG")

# ---- start: daemon, pid file, log ----

runp "$VPROXY" start
expect_rc 0 "vproxy start"
expect_no_out "vproxy start"
check "start says one line: started (pid N)" test "$(wc -l <"$T/err")" -eq 1
expect_err "vproxy: started (pid " "vproxy start"
pid=$(sed -n 's/.*started (pid \([0-9]*\)).*/\1/p' "$T/err")
check "the pid file exists" test -f "$PIDFILE"
check "the pid file is mode 0600" test "$(mode "$PIDFILE")" = 600
check "the pid file is ours" test "$(stat -c %u "$PIDFILE")" = "$(id -u)"
check "the pid file holds the daemon's pid ($pid)" test "$(cat "$PIDFILE")" = "$pid"
check "that process runs" kill -0 "$pid"
check "the log file exists" test -f "$LOG"
check "the log file is mode 0600" test "$(mode "$LOG")" = 600
check "the oversized log was rotated to vproxy.log.1" test -f "$LOG.1" -a "$(stat -c %s "$LOG")" -lt 4096
check "the log says it started, with the key count" grep -qE "vproxy\[$pid\]: started: 1 key, control socket" "$LOG"
check "log lines are timestamped" grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z vproxy' "$LOG"

runp "$VPROXY" start
expect_rc 0 "a second start"
expect_err "already running" "a second start"

# ---- status ----

runp "$VPROXY" status
expect_rc 0 "status"
expect_out "vproxy running: pid $pid, up " "status: pid and uptime"
expect_out "keys: deploy-key" "status: key names"
expect_out "sessions: 0" "status: no session yet"
expect_not "$SECRET" "$T/out" "status never shows the secret"
runp "$VPROXY" status -v
expect_out "pid file: $PIDFILE" "status -v: pid file"
expect_out "log: $LOG" "status -v: log"
expect_out "control socket: $RUNDIR/control.sock" "status -v: control socket"
runp "$VPROXY" status --keys
expect_rc 0 "status --keys"
check "status --keys: just the names" test "$(cat "$T/out")" = "deploy-key"

# A live session with one request (refused: not a bound host) and a command.
rm -f "$T/ready"
"$VRUN" -k deploy -- sh -c 'curl -s -o /dev/null --max-time 10 https://elsewhere.example.test/; : >"$0"; sleep 30' "$T/ready" </dev/null >/dev/null 2>&1 &
vrun_pid=$!
for _ in $(seq 100); do [ -e "$T/ready" ] && break; sleep 0.1; done
check "the session's command ran" test -e "$T/ready"
runp "$VPROXY" status
expect_out "sessions: 1" "status: the live session"
check "status: session id, 1 request, the command" grep -qE '^  [0-9a-f]{16} +1  sh -c curl -s -o /dev/null' "$T/out"
runp "$VPROXY" status --json
expect_json 'j["pid"] == '"$pid"' and j["keys"] == ["deploy-key"] and len(j["sessions"]) == 1 and j["sessions"][0]["requests"] == 1 and j["sessions"][0]["command"].startswith("sh -c curl") and j["pid_file"] == "'"$PIDFILE"'" and j["log"] == "'"$LOG"'" and j["uptime"] >= 0' "status --json"
kill "$vrun_pid" 2>/dev/null
wait "$vrun_pid" 2>/dev/null
for _ in $(seq 50); do
	"$VPROXY" status 2>/dev/null | grep -q "sessions: 0" && break
	sleep 0.1
done
runp "$VPROXY" status
expect_out "sessions: 0" "status: the session ended with its command"

# ---- stop ----

runp "$VPROXY" stop
expect_rc 0 "vproxy stop"
check "the pid file is removed" test ! -e "$PIDFILE"
# Gone, or a zombie its new parent has not reaped yet.
check "the daemon is gone" sh -c "! grep -qv '^[0-9]* ([^)]*) Z' /proc/$pid/stat 2>/dev/null"
check "the log says it stopped" grep -q "vproxy\[$pid\]: stopped" "$LOG"
runp "$VPROXY" status
expect_rc 3 "status after stop"
runp "$VPROXY" status --keys
expect_rc 3 "status --keys after stop"
expect_no_out "status --keys after stop"
expect_no_err "status --keys after stop (quiet, for completion)"
expect_not "$SECRET" "$LOG" "the log never holds the secret"
expect_not "$PASS" "$LOG" "the log never holds the passphrase"
expect_not "$SECRET" "$LOG.1" "nor the rotated log"

# ---- --foreground: stderr, no log file, systemd's notify protocol ----

rm -f "$LOG" "$LOG.1"
python3 - "$VPROXY" "$T" "$PIDFILE" >"$T/fg" 2>&1 <<'PY'
import os, signal, socket, subprocess, sys, time
vproxy, tmp, pidfile = sys.argv[1:4]
path = tmp + "/notify"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(20)
p = subprocess.Popen([vproxy, "start", "--foreground"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                     env=dict(os.environ, NOTIFY_SOCKET=path))
msg = s.recv(4096).decode()
print("notify:", msg.replace("\n", " "))
print("pidfile:", os.path.exists(pidfile) and open(pidfile).read().strip() == str(p.pid))
p.send_signal(signal.SIGTERM)
try:
    msg = s.recv(4096).decode()
    print("notify:", msg)
except socket.timeout:
    print("notify: none")
err = p.stderr.read().decode()
print("rc:", p.wait(timeout=20))
print("stderr:", err.replace("\n", " | "))
print("pidfile after:", os.path.exists(pidfile))
PY
sed 's/^/#   /' "$T/fg"
check "--foreground sends READY=1 to NOTIFY_SOCKET" grep -q "^notify: READY=1" "$T/fg"
check "--foreground writes the pid file" grep -q "^pidfile: True" "$T/fg"
check "--foreground sends STOPPING=1 when stopping" grep -q "^notify: STOPPING=1" "$T/fg"
check "--foreground exits 0 on SIGTERM" grep -q "^rc: 0" "$T/fg"
check "--foreground logs to stderr: started, ready, stopped" grep -qE "^stderr: vproxy\[[0-9]+\]: started: 1 key.* \| vproxy: ready \| vproxy\[[0-9]+\]: stopped" "$T/fg"
check "--foreground removes the pid file" grep -q "^pidfile after: False" "$T/fg"
check "--foreground writes no log file" test ! -e "$LOG"
expect_not "$SECRET" "$T/fg" "--foreground never prints the secret"

# ---- the systemd user unit ----

UNIT="$SRC/contrib/systemd/vproxy.service.in"
check "the unit runs vproxy start --foreground" grep -q '^ExecStart=@VRUN_BINDIR@/vproxy start --foreground$' "$UNIT"
check "the unit is Type=notify" grep -q '^Type=notify$' "$UNIT"
check "the unit reads the passphrase from a file" grep -q '^Environment=VAULT_PASSPHRASE_FILE=' "$UNIT"
if command -v systemd-analyze >/dev/null 2>&1; then
	mkdir -m 700 "$T/xdg"
	sed "s#@VRUN_BINDIR@#$(dirname "$VPROXY")#" "$UNIT" >"$T/vproxy.service"
	XDG_RUNTIME_DIR="$T/xdg" timeout 60 systemd-analyze --user --man=no verify \
		"$T/vproxy.service" >"$T/out" 2>"$T/err"
	RC=$?
	LAST_CMD="systemd-analyze --user --man=no verify vproxy.service"
	expect_rc 0 "systemd-analyze verify"
	expect_no_err "systemd-analyze verify: no complaint"
else
	echo "# note: systemd-analyze is not installed: the unit's syntax was not verified"
fi

finish
