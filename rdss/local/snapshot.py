"""Snapshots of the emulator's whole state: every moto backend in use, pickled at one point of
the journal, so the journal can let go of what came before (compaction) and a restart replays only
what came after.

moto keeps each service's state in a ``BackendDict`` (account -> region -> backend), and lists
the ones in use in ``BackendDict._instances``. A snapshot pickles all of them in one go (objects
shared between services stay shared), each named by the module attribute that holds it. What
pickle cannot take is given a form it can: locks are pickled as new, unlocked locks, weak
dictionaries and sets as the entries they hold (moto's Lambda backend keeps its functions by ARN
in a ``WeakValueDictionary``), ``cryptography``'s keys and certificates as PEM.

A pickle runs code named in it when it is read, so a snapshot is verified before it is parsed:

* the file is a header (format, moto's version, the journal index it covers, the payload's
  length), an HMAC-SHA256 of header and payload under the state directory's own ``key`` (32
  random bytes, mode 0600, in a directory only its user can write), then the payload. A file
  that does not verify - damaged, cut short, or not written with this directory's key - is never
  unpickled (:class:`SnapshotDamaged`);
* one that verifies is read by an unpickler that finds only moto's and rdss' own classes and
  functions and a list of standard ones (:data:`_ALLOWED`), never ``os.system`` or the like, even
  re-exported by a moto module;
* a snapshot written by another moto version is refused (:class:`SnapshotError`).

The file is written beside its final name, synced, then renamed over it (:mod:`rdss.host.safefiles`),
so a crash leaves the old snapshot or the new one, never half of one.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import hmac
import io
import pickle
import struct
import sys
import threading
import types
import weakref
from typing import Any

import orjson

from rdss.host.safefiles import Directory

SNAPSHOT = "snapshot"
MAGIC = b"RDSS snapshot 2\n"
_LENGTH = struct.Struct(">I")
_MAC_BYTES = 32
_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))
_WEAK_TYPES = (weakref.WeakValueDictionary, weakref.WeakKeyDictionary, weakref.WeakSet)


class SnapshotError(Exception):
    """A snapshot that cannot be used (another moto wrote it)."""


class SnapshotDamaged(SnapshotError):
    """A snapshot that does not verify: damaged, cut short, or not this directory's."""

    def __init__(self, message: str, index: int | None) -> None:
        super().__init__(message)
        #: The journal index its header claims to cover (unverified), if it can be read.
        self.index = index


def dump(index: int) -> bytes:
    """The state of every moto backend in use, as of journal entry ``index``: a snapshot's
    header and payload, not yet signed. The caller keeps state from changing meanwhile."""
    import moto

    backends = _backends_in_use()
    for attempt in range(3):
        buffer = io.BytesIO()
        try:
            _Pickler(buffer).dump(backends)
            break
        except RuntimeError:  # a read created a region's backend while we pickled: again
            if attempt == 2:
                raise
    payload = buffer.getvalue()
    header = orjson.dumps({"moto": moto.__version__, "index": index, "size": len(payload)})
    return _LENGTH.pack(len(header)) + header + payload


def write(files: Directory, key: bytes, dumped: bytes) -> int:
    """Sign ``dumped`` (from :func:`dump`) with ``key`` and make it the snapshot; its size."""
    signed = MAGIC + hmac.new(key, MAGIC + dumped, hashlib.sha256).digest() + dumped
    files.write(SNAPSHOT, signed)
    return len(signed)


def covers(files: Directory) -> int | None:
    """The index the snapshot's header says it covers (unverified: to name what a damaged one
    held), None without a snapshot or a readable header."""
    data = files.read(SNAPSHOT, len(MAGIC) + _MAC_BYTES + 4096)
    if data is None:
        return None
    return _claimed_index(data)


def load(files: Directory, key: bytes) -> int:
    """Verify the snapshot, then put its backends in place of the current ones; returns the
    journal index it covers (0 when there is no snapshot).

    Raises:
        SnapshotDamaged: it does not verify (nothing of it was parsed).
        SnapshotError: another moto version wrote it.
    """
    import moto

    data = files.read(SNAPSHOT)
    if data is None:
        return 0
    index = _claimed_index(data)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _MAC_BYTES + _LENGTH.size:
        raise SnapshotDamaged("it is not a snapshot this version of rdss writes, or it is cut short", index)
    mac, signed = data[len(MAGIC) : len(MAGIC) + _MAC_BYTES], data[len(MAGIC) + _MAC_BYTES :]
    if not hmac.compare_digest(mac, hmac.new(key, MAGIC + signed, hashlib.sha256).digest()):
        raise SnapshotDamaged("its checksum does not match (damaged, or not written with this directory's key)", index)
    header_length = _LENGTH.unpack(signed[: _LENGTH.size])[0]
    header = orjson.loads(signed[_LENGTH.size : _LENGTH.size + header_length])
    payload = signed[_LENGTH.size + header_length :]
    if header["moto"] != moto.__version__:
        raise SnapshotError(f"it was written by moto {header['moto']}, this is moto {moto.__version__}")
    try:
        saved = _Unpickler(io.BytesIO(payload)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError) as error:
        raise SnapshotError(f"it cannot be read by this rdss ({type(error).__name__}: {error})") from error
    for (module_name, attribute), accounts in saved.items():
        __import__(module_name)
        backend_dict = getattr(sys.modules[module_name], attribute)
        backend_dict.clear()
        backend_dict.update(accounts)
        if backend_dict not in _instances():
            _instances().append(backend_dict)
    return int(header["index"])


def _claimed_index(data: bytes) -> int | None:
    try:
        signed = data[len(MAGIC) + _MAC_BYTES :]
        header_length = _LENGTH.unpack(signed[: _LENGTH.size])[0]
        index = orjson.loads(signed[_LENGTH.size : _LENGTH.size + header_length])["index"]
        return index if isinstance(index, int) and index >= 0 else None
    except (struct.error, orjson.JSONDecodeError, KeyError, TypeError):
        return None


def _backends_in_use() -> dict[tuple[str, str], dict[str, Any]]:
    """Each BackendDict in use, keyed by the (module, attribute) that holds it."""
    from moto.core.base_backend import BackendDict

    in_use = {id(backend_dict): backend_dict for backend_dict in _instances() if len(backend_dict)}
    named: dict[tuple[str, str], dict[str, Any]] = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("moto.") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if id(value) in in_use and isinstance(value, BackendDict):
                named.setdefault((module_name, attribute), dict(value))
                in_use.pop(id(value))
    return named


def _instances() -> list[Any]:
    """moto's list of the BackendDicts in use (``BackendDict._instances``)."""
    from moto.core.base_backend import BackendDict

    instances: list[Any] = vars(BackendDict)["_instances"]
    return instances


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
            _check_nameable(obj)  # never write a snapshot the unpickler would refuse
            return NotImplemented
        if isinstance(obj, _LOCK_TYPES):
            return (_new_rlock if "RLock" in type(obj).__name__ else _new_lock, ())
        if isinstance(obj, threading.Condition):
            return (_new_condition, (isinstance(obj._lock, _LOCK_TYPES[1]),))  # type: ignore[attr-defined]
        if isinstance(obj, threading.Event):
            return (_new_event, (obj.is_set(),))
        if isinstance(obj, _WEAK_TYPES):
            return _weak_reducer(obj)
        if isinstance(obj, collections.defaultdict) and (
            type(obj) is not collections.defaultdict or _anonymous(obj.default_factory)
        ):
            return _defaultdict_reducer(obj)
        if isinstance(obj, types.MethodType):
            return _method_reducer(obj)
        if type(obj).__module__.startswith("cryptography.hazmat.bindings"):
            return _cryptography_reducer(obj)
        return NotImplemented


def _anonymous(factory: Any) -> bool:
    """A factory pickle cannot name (a lambda, a local function)."""
    qualname = getattr(factory, "__qualname__", "")
    return factory is not None and ("<lambda>" in qualname or "<locals>" in qualname)


_EMPTY_BUILTINS = (dict, list, set, int, float, str, tuple)


def _defaultdict_reducer(obj: collections.defaultdict[Any, Any]) -> Any:
    """A defaultdict whose factory is a lambda making an empty builtin (moto's
    ``defaultdict(lambda: {})``), or an empty defaultdict of one (``lambda: defaultdict(dict)``),
    as one whose factory pickle can name; a subclass of moto's (whose ``__init__`` takes other
    arguments than a factory) made without calling its ``__init__``. Any other, as pickle says."""
    factory: Any = obj.default_factory
    if _anonymous(factory):
        made = factory() if _no_arguments(factory) else None
        if type(made) in _EMPTY_BUILTINS and not made:
            factory = type(made)
        elif type(made) is collections.defaultdict and not made and made.default_factory in _EMPTY_BUILTINS:
            factory = functools.partial(collections.defaultdict, made.default_factory)
        else:
            return NotImplemented
    if type(obj) is collections.defaultdict:
        return (collections.defaultdict, (factory,), None, None, iter(obj.items()))
    if not _defined_by_moto(type(obj)):
        return NotImplemented
    return (_new_defaultdict, (type(obj), factory), vars(obj) or None, None, iter(obj.items()))


def _new_defaultdict(cls: type, factory: Any) -> Any:
    if not (isinstance(cls, type) and issubclass(cls, collections.defaultdict) and _defined_by_moto(cls)):
        raise pickle.UnpicklingError(f"a snapshot may not make a {cls!r}")
    made = cls.__new__(cls)
    collections.defaultdict.__init__(made, factory)
    return made


def _method_reducer(method: types.MethodType) -> Any:
    """A moto object's bound method (moto keeps some, as filters) as its object and name, which
    :func:`_bound_method` looks up again - not as pickle's ``getattr``, which a snapshot may not name."""
    owner, function = method.__self__, method.__func__
    if _defined_by_moto(type(owner)) and getattr(type(owner), function.__name__, None) is function:
        return (_bound_method, (owner, function.__name__))
    return NotImplemented


def _bound_method(owner: Any, name: str) -> Any:
    function = getattr(type(owner), name, None)
    if not (_defined_by_moto(type(owner)) and isinstance(function, types.FunctionType) and _defined_by_moto(function)):
        raise pickle.UnpicklingError(f"a snapshot may not name the method {name} of {type(owner).__qualname__}")
    return getattr(owner, name)


def _defined_by_moto(thing: Any) -> bool:
    module = getattr(thing, "__module__", "") or ""
    return module == "moto" or module.startswith("moto.")


def _no_arguments(factory: Any) -> bool:
    code = getattr(factory, "__code__", None)
    return code is not None and code.co_argcount == 0 and not code.co_freevars


def _new_lock() -> Any:
    return threading.Lock()


def _new_rlock() -> Any:
    return threading.RLock()


def _new_condition(reentrant: bool) -> Any:
    """A condition as new: its waiters were threads of the process that wrote the snapshot."""
    return threading.Condition(threading.RLock() if reentrant else threading.Lock())


def _new_event(is_set: bool) -> Any:
    event = threading.Event()
    if is_set:
        event.set()
    return event


def _weak_reducer(obj: Any) -> Any:
    """A weak container as the entries it holds now. Every entry's object is pickled where it is
    held strongly too (or it would not be in the container), so it comes back shared."""
    if isinstance(obj, weakref.WeakValueDictionary):
        return (_weak_values, (dict(obj.items()),))
    if isinstance(obj, weakref.WeakKeyDictionary):
        return (_weak_keys, (dict(obj.items()),))
    return (_weak_set, (list(obj),))


def _weak_values(entries: dict[Any, Any]) -> Any:
    return weakref.WeakValueDictionary(entries)


def _weak_keys(entries: dict[Any, Any]) -> Any:
    return weakref.WeakKeyDictionary(entries)


def _weak_set(entries: list[Any]) -> Any:
    return weakref.WeakSet(entries)


def _cryptography_reducer(obj: Any) -> Any:
    """Keys and certificates of ``cryptography`` (its Rust objects do not pickle) as their PEM:
    every KMS key moto makes holds an RSA or EC private key, ACM and IoT hold certificates."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    pem = serialization.Encoding.PEM
    if isinstance(obj, x509.Certificate):
        return (_load_certificate, (obj.public_bytes(pem),))
    if hasattr(obj, "private_bytes"):
        data = obj.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return (_load_private_key, (data,))
    if hasattr(obj, "public_bytes"):
        return (_load_public_key, (obj.public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),))
    return NotImplemented  # anything else of theirs: pickle says what it cannot take


def _load_certificate(data: bytes) -> Any:
    from cryptography import x509

    return x509.load_pem_x509_certificate(data)


def _load_private_key(data: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_private_key(data, password=None)


def _load_public_key(data: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(data)


#: What a snapshot may name besides moto's own classes: the standard types moto's state holds,
#: and this module's rebuilders. Nothing here runs a command, opens a file or imports a module.
_ALLOWED = {
    "builtins": {"set", "frozenset", "bytearray", "complex", "slice", "range", "object", "bytes", "dict", "list"},
    "collections": {"OrderedDict", "defaultdict", "deque", "Counter"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "uuid": {"UUID", "SafeUUID"},
    "enum": {"Enum"},
    "copyreg": {"_reconstructor"},
    "ipaddress": {"IPv4Address", "IPv6Address", "IPv4Network", "IPv6Network", "IPv4Interface", "IPv6Interface"},
    "functools": {"partial"},
    "re": {"_compile"},
    __name__: {
        "_bound_method",
        "_new_defaultdict",
        "_new_condition",
        "_new_event",
        "_new_lock",
        "_new_rlock",
        "_weak_values",
        "_weak_keys",
        "_weak_set",
        "_load_certificate",
        "_load_private_key",
        "_load_public_key",
    },
}


def _check_nameable(obj: Any) -> None:
    """Refuse to pickle a class or function the unpickler would not find (:class:`_Unpickler`).

    Raises:
        pickle.PicklingError: naming it, so the snapshot is not written (the journal keeps all).
    """
    module, name = getattr(obj, "__module__", None) or "", getattr(obj, "__qualname__", "")
    if name in _ALLOWED.get(module, ()):
        return
    if (module == "moto" or module.startswith("moto.")) and isinstance(obj, type | types.FunctionType):
        return
    raise pickle.PicklingError(f"the emulator's state holds {module}.{name}, which a snapshot may not name")


class _Unpickler(pickle.Unpickler):
    """Finds moto's own classes and functions, and :data:`_ALLOWED`; refuses anything else."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get(module)
        if allowed is not None:
            if name in allowed:
                return super().find_class(module, name)
        elif module == "moto" or module.startswith("moto."):
            found = super().find_class(module, name)
            # defined by moto, under the name it was found by: not os.system re-exported by a moto module
            if isinstance(found, type | types.FunctionType) and (
                found.__module__ == module and found.__qualname__ == name
            ):
                return found
        raise pickle.UnpicklingError(f"a snapshot may not name {module}.{name}")
