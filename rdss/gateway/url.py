"""Gateway URLs: which messaging system a gateway talks to, and how to reach it.

* ``kinesis://<env>`` - the deployment ``<env>`` (streams ``<prefix>-<env>-<channel>``, tables
  ``<prefix>-<env>-messages`` and ``-checkpoints``). Query parameters: ``endpoint=`` an http(s)
  URL (the embedded emulator, LocalStack; default: boto3's own resolution, including
  ``AWS_ENDPOINT_URL``), ``region=``, ``prefix=`` (default ``rdss``), ``ldr=`` the application's
  Local Data Repository: ``dynamodb://TABLE`` (a table of the application's own; required in
  AWS) or ``sqlite:///path`` (default: ``$XDG_STATE_HOME/rdss/kinesis-<prefix>-<env>.sqlite``);
  ``role=`` an IAM role ARN to assume (a vendor's, as ``rdss vendor config`` prints it) with
  ``external_id=``.
* ``memory://<bus>`` - the spec's Mock: an in-process bus shared by every gateway opened with
  the same name in the process. ``partitions=N`` (default 1) gives each channel N partitions;
  ``ldr=`` as for kinesis (default: the bus's own, in memory).
* Every backend takes ``ldr=`` (see :mod:`rdss.repository.stores`); never the deployment's
  ``messages`` table, which only the broker and the sequencer write.
* Other schemes (``amqp://``) are passed whole to the backend registered for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from rdss.host.display import redact

#: The URL ``Gateway()`` uses when neither ``RDSS_GATEWAY_URL`` nor a running local runtime names
#: one (the commands never do: with none named they exit 2).
DEFAULT_URL = "kinesis://dev"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
#: What STS accepts as an ExternalId: 2 to 1,224 characters of these (anything else is refused
#: by AssumeRole, so it is a mistake in the URL, told at once rather than on every send).
_EXTERNAL_ID = re.compile(r"[\w+=,.@:/-]{2,1224}\Z", re.ASCII)
_KNOWN: dict[str, frozenset[str]] = {
    "kinesis": frozenset({"endpoint", "region", "prefix", "ldr", "role", "external_id"}),
    "memory": frozenset({"partitions", "ldr"}),
}


class URLError(ValueError):
    """A gateway URL that cannot be used; the message says what is wrong with it, the URL's
    secrets (a password, a token) replaced by ``***`` (:func:`rdss.host.display.redact`): the
    message is printed and logged."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True)
class GatewayURL:
    """A parsed gateway URL."""

    scheme: str
    #: The deployment environment (kinesis), the bus name (memory), the host part (others).
    name: str
    params: Mapping[str, str] = field(default_factory=dict)
    #: The URL as given, for backends that parse their own (credentials, virtual hosts).
    raw: str = ""

    def param(self, name: str, default: str | None = None) -> str | None:
        return self.params.get(name, default)


def parse(url: str) -> GatewayURL:
    """Parse and check a gateway URL.

    Raises:
        URLError: no scheme, no name, a malformed name, an unknown or repeated query parameter,
            or a fragment.
    """
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # a malformed port or IPv6 host raises here, not in a backend
    except ValueError as error:
        raise URLError(f"{url!r} is not a gateway URL: {error}") from None
    scheme = parts.scheme.lower()
    if not scheme or "://" not in url:
        raise URLError(f"{url!r} is not a gateway URL: expected e.g. kinesis://dev or memory://tests")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    params = dict(pairs)
    if len(params) < len(pairs):  # which one counts is no parser's to guess (two ldr= would pick a store)
        repeated = sorted({key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1})
        raise URLError(f"{url!r}: parameter(s) {', '.join(repeated)} given more than once")
    known = _KNOWN.get(scheme)
    if known is None:  # another backend's URL: it checks its own parts
        return GatewayURL(scheme, parts.hostname or parts.netloc, params, url)
    if parts.fragment or url.rstrip().endswith("#"):
        raise URLError(f"{url!r}: a {scheme}:// URL has no #fragment (a parameter goes after ?)")
    name = parts.netloc
    if not name or not _NAME.match(name) or parts.path not in ("", "/"):
        raise URLError(f"{url!r}: {scheme}:// needs one name, e.g. {scheme}://dev (letters, digits, - _ .)")
    unknown = sorted(set(params) - known)
    if unknown:
        raise URLError(
            f"{url!r}: unknown parameter(s) {', '.join(unknown)}; {scheme}:// takes {', '.join(sorted(known))}"
        )
    endpoint = params.get("endpoint")
    if endpoint is not None:
        _check_endpoint(url, endpoint)
    if "external_id" in params and "role" not in params:
        raise URLError(f"{url!r}: external_id= is presented when assuming a role: give role= too")
    external_id = params.get("external_id")
    if external_id is not None and not _EXTERNAL_ID.match(external_id):
        raise URLError(
            f"{url!r}: external_id must be 2 to 1,224 letters, digits or +=,.@:/- (as rdss vendor config prints it)"
        )
    role = params.get("role")
    if role is not None and not re.match(r"arn:aws[a-z-]*:iam::\d{12}:role/", role):
        raise URLError(f"{url!r}: role must be an IAM role ARN, got {role!r}")
    partitions = params.get("partitions")
    if partitions is not None and (not partitions.isdigit() or not 1 <= int(partitions) <= 1024):
        raise URLError(f"{url!r}: partitions must be a whole number from 1 to 1024")
    return GatewayURL(scheme, name, params, url)


def _check_endpoint(url: str, endpoint: str) -> None:
    """An ``endpoint=`` that boto3 can use: http(s), a host, a port in range.

    Raises:
        URLError: it is not.
    """
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError as error:
        raise URLError(f"{url!r}: endpoint {endpoint!r} is not a URL: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise URLError(f"{url!r}: endpoint must be an http(s) URL with a host, got {endpoint!r}")
    if port == 0:
        raise URLError(f"{url!r}: endpoint {endpoint!r} names port 0")
