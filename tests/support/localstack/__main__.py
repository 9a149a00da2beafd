"""``python -m tests.support.localstack install`` | ``run -- CMD [ARG ...]``.

``run`` starts LocalStack on a free loopback port, runs CMD with ``AWS_ENDPOINT_URL`` (and
test credentials) pointing at it, stops it, and exits with CMD's exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.support.localstack import LocalStack, LocalStackUnavailable
from tests.support.localstack.install import install, main


def run(command: list[str]) -> int:
    if not command:
        print("usage: python -m tests.support.localstack run -- CMD [ARG ...]", file=sys.stderr)
        return 2
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
        return subprocess.run(command, env={**os.environ, **localstack.client_environment()}, check=False).returncode
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
