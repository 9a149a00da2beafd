"""Text a person reads: control characters escaped, secrets redacted, long values cut.

Whatever reaches a terminal or a log line may hold bytes a producer or a peer chose: a newline
in a ``generator`` would forge a line of a timeline, an ANSI escape would drive the terminal.
:func:`printable` escapes them at the printing edge (the CLI's output, the log formatters).
:func:`redact` hides the secrets a URL or a configuration can carry (a password in
``amqp://user:PASSWORD@host``, ``?password=``, ``token=``, secret keys) wherever one is printed or
logged, so a typo'd URL is never echoed back whole.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.text import Text

#: What a redacted secret reads as.
MASK = "***"

# C0 and C1 controls and DEL; the Unicode bidirectional marks, overrides and isolates that reorder
# what a terminal shows ("Trojan Source"); the line and paragraph separators; and lone surrogates,
# which no terminal can be sent (Python reads a file name or an argument that is not UTF-8 into
# them: byte 0xff becomes U+DCFF): each becomes a visible escape.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: The surrogates Python's ``surrogateescape`` makes of the bytes 0x80-0xff that are not UTF-8.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)

# ``scheme://user:password@`` anywhere in a text: the password goes.
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)(?P<secret>[^\s@/'\"]*)(?P<at>@)")
# a query parameter or ``name=value`` setting whose name says it is a secret
_SECRET_NAMES = (
    r"password|passwd|pwd|secret|secret_?key|secret_?access_?key|aws_secret_access_key|"
    r"token|auth_?token|access_?token|session_?token|security_?token|x-amz-security-token|"
    r"api_?key|apikey|credentials?|signature|x-amz-signature|sig|private_?key"
)
_SECRET_PARAMETER = re.compile(
    rf"(?P<head>(?:^|[?&;\s'\"])(?:{_SECRET_NAMES})\s*[=:]\s*)(?P<secret>[^&;\s'\"]+)", re.IGNORECASE
)


def printable(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``, ``\\u202e``), so that
    it shows as one line and cannot drive the terminal."""
    if _CONTROL.search(text) is None:  # the common case: nothing to do
        return text
    return _CONTROL.sub(_escape, text)


# what JSON encoders leave raw (C0 they escape already): DEL, C1, the bidirectional controls
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def printable_json(data: bytes) -> bytes:
    """JSON text (UTF-8) with the control characters JSON encoders leave raw written as
    ``\\uXXXX`` escapes: the same JSON value, safe on a terminal."""
    text = data.decode("utf-8")
    if _JSON_RAW.search(text) is None:
        return data
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code in _ESCAPED_BYTES:  # the byte the name held, as the shell's $'\xff' would write it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def redact(text: str) -> str:
    """``text`` with the secrets it holds replaced by ``***``: a URL's password, and the value of
    any ``password=``, ``token=``, ``secret=``-like setting."""
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m['head']}{MASK}{m['at']}", text)
    if "=" in text or ":" in text:
        text = _SECRET_PARAMETER.sub(lambda m: f"{m['head']}{MASK}", text)
    return text


def redact_url(url: str) -> str:
    """A URL fit to show: its password and its secret-named query parameters replaced by ``***``
    (the rest kept, so the user can still tell which URL it was)."""
    return redact(url)


def safe(text: str) -> str:
    """:func:`redact` then :func:`printable`: what any line for a person goes through."""
    return printable(redact(text))


class PrintableLines:
    """A text stream whose every line is written :func:`printable`: what is written keeps its
    line breaks, and nothing else it holds reaches the terminal raw."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write("\n".join(printable(line) for line in text.split("\n")))


def rich_text(*parts: str | tuple[str, str]) -> Text:
    """A line for a rich console, made of ``parts`` - each a text, or a (text, style) pair - every
    text :func:`printable` and none of it read as console markup: a name holding ``[/]`` or
    ``[bold]`` is shown as written, where markup would fail on a tag that closes nothing, restyle
    what follows, or (escaped with backslashes) lose a backslash the name holds."""
    from rich.text import Text  # only the consoles that need it pay for rich

    return Text.assemble(
        *(printable(part) if isinstance(part, str) else (printable(part[0]), part[1]) for part in parts)
    )


def shorten(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out (a peer's identifier
    can be megabytes long; a log line about it need not be)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"
