"""How many examples a property draws, and how large a workload is, on the endpoint under test.

The integration suite runs twice in ``make test``: on the embedded emulator, which the project
runs and which answers in microseconds, and on LocalStack (``AWS_ENDPOINT_URL`` set), a second,
independent implementation of the same AWS APIs whose every call costs a server's CPU. The
properties' breadth - the many shapes of keys, arrivals and faults - is the subject of the first
run; the second asks whether the endpoint's own semantics (conditional writes, shard iterators,
partial PutRecords failures, Firehose delivery, CloudFormation) give the same verdicts, which a
fifth of the examples and of the workload answers as well as all of them. So on an endpoint the
project does not run, :func:`share` gives a fifth (never fewer than ``floor``).

Decided when a test module is imported (decorators read it), from the environment the suite was
started with, as :func:`rdss.local.emulator.connect` decides which endpoint the suite talks to.
``RDSS_TEST_SHARE=N`` sets the divisor whatever the endpoint (``1``: every example on LocalStack
too; ``5``: LocalStack's breadth tried on the embedded emulator).
"""

from __future__ import annotations

import os

#: the part of each property's examples and each workload drawn on an endpoint elsewhere
ELSEWHERE = 5


def elsewhere() -> bool:
    """Whether the suite talks to an endpoint the project does not run (LocalStack, an account)."""
    return bool(os.environ.get("AWS_ENDPOINT_URL"))


def divisor() -> int:
    """1 on the embedded emulator, :data:`ELSEWHERE` elsewhere, or ``RDSS_TEST_SHARE``."""
    given = os.environ.get("RDSS_TEST_SHARE", "")
    if given:
        return max(1, int(given))
    return ELSEWHERE if elsewhere() else 1


def share(n: int, *, floor: int = 3) -> int:
    """``n`` on the embedded emulator; ``n // 5`` elsewhere, and never fewer than ``floor``."""
    return max(min(n, floor), n // divisor())
