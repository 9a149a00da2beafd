"""Make one request to moto's server reproducible: the same request replayed later, into the
state it first met, draws the same "random" identifiers and reads the same clock.

The journal (:mod:`rdss.local.durable`) replays the requests that changed the emulator's state
after a restart. What moto does with a request is a function of the request, the state, its
random source and its clock; the state is rebuilt in the same order, so only the last two need
pinning. Inside :func:`reproducible` - and only in the calling thread, so that the server's other
threads (reads, which are not journalled) keep their own randomness - moto's shared random source
(``mock_random``: request ids, SQS message ids and receipt handles, IAM ids...),
``os.urandom`` (S3 upload ids, STS session tokens) and moto's clock (``moto.core.utils.utcnow``,
hence Kinesis arrival times, SQS timestamps, S3 modification times) answer from the seed and the
moment given. Code that reads ``time.time()`` or ``datetime.now()`` itself is not pinned: a
replay moves such timestamps to the replay's time, which none of the runtime's decisions read.
"""

from __future__ import annotations

import datetime
import os
import random
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_pinned = threading.local()
_installed = False
_install_lock = threading.Lock()


@contextmanager
def reproducible(seed: int, moment: float) -> Iterator[None]:
    """Within this block, in this thread: randomness from ``seed``, moto's clock at ``moment``
    (seconds since the epoch)."""
    install()
    _pinned.random = random.Random(seed)
    _pinned.now = datetime.datetime.fromtimestamp(moment, datetime.UTC).replace(tzinfo=None)
    try:
        yield
    finally:
        _pinned.random = None
        _pinned.now = None


def install() -> None:
    """Route moto's random source, ``os.urandom`` and moto's clock through the pins (once)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _pin_moto_random()
        _pin_urandom()
        _pin_moto_clock()
        _installed = True


def _pinned_random() -> random.Random | None:
    return getattr(_pinned, "random", None)


def _pin_moto_random() -> None:
    # Every method of random.Random (choice, randint, uuid4 in MotoRandom...) draws through
    # random() or getrandbits(); routing those two routes them all.
    from moto.moto_api._internal.moto_random import MotoRandom

    shared_random, shared_bits = random.Random.random, random.Random.getrandbits

    def draw(self: random.Random) -> float:
        pinned = _pinned_random()
        return pinned.random() if pinned is not None else shared_random(self)

    def bits(self: random.Random, k: int) -> int:
        pinned = _pinned_random()
        return pinned.getrandbits(k) if pinned is not None else shared_bits(self, k)

    MotoRandom.random = draw  # type: ignore[method-assign,assignment]
    MotoRandom.getrandbits = bits  # type: ignore[method-assign,assignment]


def _pin_urandom() -> None:
    system_urandom = os.urandom

    def urandom(size: int) -> bytes:
        pinned = _pinned_random()
        return pinned.randbytes(size) if pinned is not None else system_urandom(size)

    os.urandom = urandom


def _pin_moto_clock() -> None:
    """Replace ``moto.core.utils.utcnow`` where moto looks it up: in ``moto.core.utils`` (its
    ``unix_time*`` helpers and every module imported from now on) and in each moto module
    already imported that bound the name itself (``from moto.core.utils import utcnow``)."""
    from moto.core import utils

    system_utcnow: Callable[[], datetime.datetime] = utils.utcnow

    def utcnow() -> datetime.datetime:
        pinned = getattr(_pinned, "now", None)
        return pinned if pinned is not None else system_utcnow()

    for name, module in list(sys.modules.items()):
        if (name == "moto" or name.startswith("moto.")) and getattr(module, "utcnow", None) is system_utcnow:
            module.utcnow = utcnow  # type: ignore[attr-defined]
    utils.utcnow = utcnow
