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

moto imports a service's module, and makes its backend for an account and region, the first time
anything asks for them - a read as often as a write - and both draw identifiers as they are made.
So that neither depends on which request came first nor shifts the draws of the request that
happened to trigger it, each moto module is imported, and each backend made, under a seed of its
own, named by the module, or by service, account and region (:func:`_pin_imports`,
:func:`_pin_backend_creation`): the same identifiers in every run, whenever they are made.
"""

from __future__ import annotations

import datetime
import importlib.abc
import importlib.machinery
import os
import random
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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
        _pin_backend_creation()
        _pin_imports()
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


@contextmanager
def _seeded(seed: str) -> Iterator[None]:
    """Within: moto's random numbers drawn from a generator of its own, seeded by ``seed`` (a str
    seed is hashed with SHA-512: the same in every process); then the generator before it again."""
    saved = _pinned_random()
    _pinned.random = random.Random(seed)
    try:
        yield
    finally:
        _pinned.random = saved


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


def _pin_backend_creation() -> None:
    """Make moto's backends (per account, and per region of an account) under seeds of their own."""
    from moto.core.base_backend import AccountSpecificBackend, BackendDict

    create_account = BackendDict._create_account_specific_backend
    region_backend = AccountSpecificBackend.__getitem__

    def create_account_specific_backend(self: Any, account_id: str) -> None:
        if dict.__contains__(self, account_id):
            return create_account(self, account_id)
        with _seeded(f"rdss backend {self.service_name}/{account_id}"):
            return create_account(self, account_id)

    def getitem(self: Any, region_name: str) -> Any:
        region = "aws" if region_name == "global" else region_name
        if dict.__contains__(self, region):
            return region_backend(self, region_name)
        with _seeded(f"rdss backend {self.service_name}/{self.account_id}/{region}"):
            return region_backend(self, region_name)

    BackendDict._create_account_specific_backend = create_account_specific_backend  # type: ignore[method-assign]
    AccountSpecificBackend.__getitem__ = getitem  # type: ignore[method-assign]


class _PinnedImports(importlib.abc.MetaPathFinder):
    """Finds moto's modules as the other finders do, and runs each one's code under its own seed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("moto."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: importlib.machinery.ModuleSpec | None = finder.find_spec(name, path, target)
            if spec is not None:
                loader = spec.loader
                if loader is not None and hasattr(loader, "exec_module"):
                    spec.loader = _PinnedLoader(loader, name)
                return spec
        return None


class _PinnedLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        with _seeded(f"rdss import {self._name}"):
            self._loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package...: the real loader's
        return getattr(self._loader, name)


def _pin_imports() -> None:
    if not any(isinstance(finder, _PinnedImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PinnedImports())
