#!/usr/bin/env python3
"""vrun end to end: real clients inside `vrun` against real servers (nginx,
git http-backend behind fcgiwrap) through vproxy, and real escape attempts
against servers the test started. See tests/e2e/README.md for what each
suite covers and which test proves which escape.

usage: e2e_test.py SUITE VAULT VPROXY VRUN
       e2e_test.py --unprivileged SUITE VAULT VPROXY VRUN
                   as root: the same suite as a throwaway uid (setpriv);
                   exit 77 (skipped) when not root
SUITE: clients, escapes, node (every node major found), node_env_proxy (the
majors that honour NODE_USE_ENV_PROXY; exit 77, skipped, when none is found).
Exit 0 all passed, 1 a failure, 77 nothing to test. Every run ends with its
SKIPPED lines (cases that could not run here) and the passed/failed count.
"""
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SUITES = ("clients", "escapes", "node", "node_env_proxy")
REQUIRED = {"nginx": "nginx", "fcgiwrap": "fcgiwrap", "git": "git", "curl": "curl",
            "openssl": "openssl", "wget": "wget"}


def main(argv):
    # ctest's timeout and Ctrl-C: unwind through the teardown all the same.
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    if argv and argv[0] == "--unprivileged":
        return harness.run_unprivileged(os.path.abspath(__file__), argv[1:])
    if len(argv) != 4 or argv[0] not in SUITES:
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
    nodes = notes = None
    if suite.startswith("node"):
        import suite_node
        nodes, notes = suite_node.find_nodes()
        if suite == "node_env_proxy" and not any(n.env_proxy for n in nodes):
            for text in notes:
                print("# node: " + text)
            print("# SKIPPED: node with NODE_USE_ENV_PROXY: no Node >= 22.21 / 24.5 here "
                  "(found: %s); none is in Debian 12's archive. VRUN_E2E_NODE=/path/to/node "
                  "tests one" % suite_node.describe(nodes), flush=True)
            return harness.SKIP
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
        elif suite == "node":
            suite_node.run_plain(h, nodes, notes)
        else:
            suite_node.run_env_proxy(h, nodes, notes)
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
