"""What every integration test script shares: one line per check ("ok" or
"FAIL"), the list of failures for the exit status, and running a helper
program that must succeed."""
import subprocess

failures = []


def check(cond, what):
    """Report one check; returns cond."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(args, env, stdin=None, check_rc=True, timeout=60):
    """Run args with env; raise with its stderr when check_rc and it fails."""
    r = subprocess.run(args, env=env, input=stdin, capture_output=True, timeout=timeout)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s: rc %d: %s" % (args, r.returncode, r.stderr.decode()))
    return r
