"""What an ``amqp://`` URL says besides where the broker is: namespace, retry tiers, queue type,
redelivery limit, envelope, state file, prefetch and confirm timeout (see :mod:`rdss.gateway.amqp`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import pika

from rdss.gateway.backend import state_directory
from rdss.gateway.url import GatewayURL, URLError

#: Mosaic's default delay tiers: 10 s for the first retries, then 30 s.
DEFAULT_TIERS = "10s:3,30s:3"
DEFAULT_REDELIVERIES = 5
DEFAULT_PREFETCH = 200

#: ``quorum`` (default): RabbitMQ counts deliveries itself (``x-delivery-count``) and dead-letters
#: past ``x-delivery-limit``, one count for every consumer on every host. ``classic``: queues as
#: they were before quorum queues, redeliveries counted in the per-host SQLite file - for
#: deployments whose queues already exist as classic ones (a queue cannot change its type).
QueueType = Literal["quorum", "classic"]

_OWN_PARAMS = frozenset(
    # ldr= is the gateway's (rdss.gateway.backend.local_data_repository), not pika's
    {
        "namespace",
        "retry",
        "redeliveries",
        "queue_type",
        "envelope",
        "state",
        "prefetch",
        "confirm_timeout",
        "ldr",
    }
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)\Z")
#: A word of a routing key: no dots, spaces or wildcards.
WORD = re.compile(r"[^.#*\s]+\Z")

#: The longest namespace: room left in an AMQP name (255 bytes) for a group, a channel and a messageType.
MAX_NAMESPACE = 64


@dataclass(frozen=True)
class Tier:
    """One delay tier: wait ``delay`` seconds before each of ``attempts`` retries."""

    delay: float
    attempts: int

    @property
    def name(self) -> str:
        """``retry.10s``, ``retry.200ms``: the TTL is in the name because queue arguments
        cannot change once a queue exists."""
        millis = round(self.delay * 1000)
        return f"retry.{millis // 1000}s" if millis % 1000 == 0 else f"retry.{millis}ms"


def tier_for(tiers: Sequence[Tier], attempt: int) -> Tier | None:
    """The tier of retry number ``attempt`` (1-based), or None when they are used up."""
    for tier in tiers:
        if attempt <= tier.attempts:
            return tier
        attempt -= tier.attempts
    return None


def parse_tiers(text: str) -> tuple[Tier, ...]:
    """``10s:3,30s:3`` -> tiers; ``none`` -> no retries.

    Raises:
        URLError: malformed.
    """
    if text.strip().lower() in ("", "none", "0"):
        return ()
    tiers = []
    for item in text.split(","):
        delay_text, _, attempts_text = item.strip().partition(":")
        match = _DURATION.match(delay_text)
        if match is None or (attempts_text and not attempts_text.isdigit()):
            raise URLError(f"retry={text!r}: expected tiers like 10s:3,30s:3 (ms, s or m; attempts per tier)")
        value, unit = float(match.group(1)), match.group(2)
        delay = value / 1000 if unit == "ms" else value * 60 if unit == "m" else value
        attempts = int(attempts_text or 1)
        if delay <= 0 or attempts < 1:
            raise URLError(f"retry={text!r}: delays and attempts must be positive")
        tiers.append(Tier(delay, attempts))
    return tuple(tiers)


@dataclass(frozen=True)
class Options:
    """What an ``amqp://`` URL says besides where the broker is."""

    parameters: pika.URLParameters
    namespace: str = ""
    tiers: tuple[Tier, ...] = field(default_factory=lambda: parse_tiers(DEFAULT_TIERS))
    redelivery_limit: int = DEFAULT_REDELIVERIES
    queue_type: QueueType = "quorum"
    envelope: Literal["mosaic", "rdss"] = "mosaic"
    state: Path = Path("rdss-amqp.sqlite")
    prefetch: int = DEFAULT_PREFETCH
    confirm_timeout: float = 30.0

    @classmethod
    def from_url(cls, url: GatewayURL) -> Options:
        """Split a URL into pika's connection parameters and this backend's options.

        Raises:
            URLError: an option is malformed.
        """
        parts = urlsplit(url.raw or f"{url.scheme}://{url.name}")
        ours: dict[str, str] = {}
        theirs: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in _OWN_PARAMS:
                ours[key] = value
            else:
                theirs.append((key, value))
        broker = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(theirs), ""))
        try:
            parameters = pika.URLParameters(broker)
        except ValueError as error:
            raise URLError(f"{url.raw!r}: {error}") from None
        namespace = ours.get("namespace", "")
        if namespace and not WORD.match(namespace):
            raise URLError(f"namespace={namespace!r}: no dots, spaces, # or *")
        # it prefixes every exchange and queue name (255 bytes at most in AMQP, beside a consumer group's
        # and a messageType's) and names the state file: a long or unprintable one fails later, as a traceback
        if len(namespace.encode(errors="surrogatepass")) > MAX_NAMESPACE or not namespace.isprintable():
            shown = f"{namespace[:40]!r}{'...' if len(namespace) > 40 else ''}"
            raise URLError(f"namespace={shown}: at most {MAX_NAMESPACE} bytes of printable text")
        if "\0" in ours.get("state", ""):
            raise URLError("state=: a file name cannot hold a NUL byte")
        queue_type = ours.get("queue_type", "quorum")
        if queue_type not in ("quorum", "classic"):
            raise URLError(f"queue_type={queue_type!r}: quorum or classic")
        envelope = ours.get("envelope", "mosaic")
        if envelope not in ("mosaic", "rdss"):
            raise URLError(f"envelope={envelope!r}: mosaic or rdss")
        try:
            limit = int(ours.get("redeliveries", DEFAULT_REDELIVERIES))
            prefetch = int(ours.get("prefetch", DEFAULT_PREFETCH))
            confirm_timeout = float(ours.get("confirm_timeout", 30.0))
        except ValueError as error:
            raise URLError(f"{url.raw!r}: {error}") from None
        # written so that nan fails: it compares false with every bound
        if not (0 <= limit <= 1_000 and 1 <= prefetch <= 65_535 and 0 < confirm_timeout <= 3_600):
            raise URLError(
                f"{url.raw!r}: redeliveries from 0 to 1,000, prefetch from 1 to 65,535, confirm_timeout above 0 and "
                "at most 3,600 (seconds)"
            )
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        default_state = state_directory() / _file_name(parts.hostname or "localhost", parts.port, vhost, namespace)
        return cls(
            parameters=parameters,
            namespace=namespace,
            tiers=parse_tiers(ours.get("retry", DEFAULT_TIERS)),
            redelivery_limit=limit,
            queue_type=queue_type,  # type: ignore[arg-type]
            envelope=envelope,  # type: ignore[arg-type]
            state=Path(ours["state"]).expanduser() if ours.get("state") else default_state,
            prefetch=prefetch,
            confirm_timeout=confirm_timeout,
        )


def _file_name(host: str, port: int | None, vhost: str, namespace: str) -> str:
    label = f"{host}-{port or 5672}-{quote(vhost, safe='')}" + (f"-{namespace}" if namespace else "")
    return f"amqp-{label}.sqlite"
