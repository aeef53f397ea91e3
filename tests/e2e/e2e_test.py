#!/usr/bin/env python3
"""vrun end to end: real clients inside `vrun` against real servers (nginx,
git http-backend behind fcgiwrap) through vproxy, and real escape attempts
against servers the test started. See tests/e2e/README.md for what each
suite covers and which test proves which escape.

usage: e2e_test.py clients|escapes|bugs VAULT VPROXY VRUN
       e2e_test.py --unprivileged clients|escapes|bugs VAULT VPROXY VRUN
                   as root: the same suite as a throwaway uid (setpriv);
                   exit 77 (skipped) when not root
"""
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

REQUIRED = {"nginx": "nginx", "fcgiwrap": "fcgiwrap", "git": "git", "curl": "curl",
            "openssl": "openssl", "wget": "wget"}


def main(argv):
    # ctest's timeout and Ctrl-C: unwind through the teardown all the same.
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    if argv and argv[0] == "--unprivileged":
        return harness.run_unprivileged(os.path.abspath(__file__), argv[1:])
    if len(argv) != 4 or argv[0] not in ("clients", "escapes", "bugs"):
        print(__doc__)
        return 2
    suite = argv[0]
    bins = [os.path.abspath(a) for a in argv[1:]]
    path = os.environ.get("PATH", "") + ":" + harness.SYSTEM_PATH
    missing = [pkg for tool, pkg in REQUIRED.items() if shutil.which(tool, path=path) is None]
    if missing:
        print("FAIL missing tools; install the Debian packages: %s (./setup does)"
              % " ".join(missing))
        return 1
    print("# e2e %s suite as uid %d (%s)" % (suite, os.geteuid(),
                                             "root" if os.geteuid() == 0 else "unprivileged"),
          flush=True)
    t0 = time.monotonic()
    h = harness.Harness(suite, *bins)
    try:
        h.start()
        print("# servers, vault and vproxy ready in %.1fs (nginx on 127.0.0.1%s port %d)"
              % (time.monotonic() - t0, " and ::1" if h.v6 else "", h.port), flush=True)
        if suite == "clients":
            import suite_clients
            suite_clients.run(h)
        elif suite == "escapes":
            import suite_escapes
            suite_escapes.run(h)
        else:
            import suite_bugs
            suite_bugs.run(h)
        h.check(h.vproxy_running(), "vproxy is still running at the end")
    except Exception as e:  # noqa: BLE001 -- a harness failure is a test failure
        import traceback
        traceback.print_exc()
        h.check(False, "the %s suite ran to the end (%s: %s)" % (suite, type(e).__name__, e))
    finally:
        h.close()
    print("# %.1fs" % (time.monotonic() - t0), flush=True)
    return h.check.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
