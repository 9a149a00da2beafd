"""``python -m tests.support.localstack install`` | ``run -- CMD [ARG ...]``.

``run`` starts LocalStack on a free loopback port, runs CMD with ``AWS_ENDPOINT_URL`` (and
test credentials) pointing at it, lists what CMD left there (streams, tables, stacks, buckets,
functions, queues), stops it, and exits with CMD's exit code - or 1 if CMD passed but left
something behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.localstack import LocalStack, LocalStackUnavailable
from tests.support.localstack.install import install, main


def run(command: list[str]) -> int:
    if not command:
        print("usage: python -m tests.support.localstack run -- CMD [ARG ...]", file=sys.stderr)
        return 2
    # stopped by a signal (a CI timeout, a developer's kill), LocalStack is stopped too: its
    # processes run in a session of their own and would otherwise outlive this one
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        install()
        localstack = LocalStack()
        started = time.monotonic()
        localstack.start()
    except LocalStackUnavailable as error:
        print(f"LocalStack: {error}", file=sys.stderr)
        return 1
    print(
        f"LocalStack up at {localstack.url} in {time.monotonic() - started:.1f} s (log: {localstack.log})", flush=True
    )
    try:
        code = subprocess.run(command, env={**os.environ, **localstack.client_environment()}, check=False).returncode
        # a leak fails the run: on an account it would hold quota and cost money (make test
        # lists lines starting "FAILED " under "failed, and why")
        left = localstack.leftovers()
        for what in left:
            print(f"FAILED left behind on LocalStack by the tests: {what}", flush=True)
        return code or (1 if left else 0)
    finally:
        localstack.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["install"]:
        sys.exit(main())
    if sys.argv[1:2] == ["run"]:
        rest = sys.argv[2:]
        sys.exit(run(rest[1:] if rest[:1] == ["--"] else rest))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
