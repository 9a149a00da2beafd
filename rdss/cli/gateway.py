"""``rdss send``, ``rdss tail`` and ``rdss request``: the Message Gateway from the command line.

The gateway URL comes from ``--url`` or ``RDSS_GATEWAY_URL`` (:func:`rdss.cli.common.deployment_url`).
Exit codes: 0 done; 1 a message was refused (invalid), not acknowledged, or a request timed
out or was answered with a failure reply; 2 usage, I/O or the messaging system unreachable.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import describe
from rdss.aws.failures import unusable as aws_unusable
from rdss.cli.common import (
    INVALID,
    USAGE,
    CommandError,
    configure_service_logging,
    deployment_url,
    describe_os_error,
    file_name,
    print_json,
    seconds,
)
from rdss.cli.options import (
    add_command,
    add_gateway_options,
    add_number_option,
    add_poll_interval_option,
    add_sender_options,
    add_stop_options,
    add_tenant_options,
)
from rdss.gateway import (
    ChannelMismatch,
    Gateway,
    GatewayError,
    MessageRefused,
    NotARequest,
    RequestFailed,
    RequestTimeout,
    SendFailed,
    TransportError,
    URLError,
)
from rdss.gateway.backend import Delivery, StartPosition
from rdss.gateway.request import DEFAULT_TIMEOUT
from rdss.gateway.send import Sendable
from rdss.gateway.url import parse as parse_url
from rdss.host.display import printable, printable_json, safe
from rdss.host.inputs import ndjson, read_input
from rdss.model import jsonkeys, translation
from rdss.model.canonical import VERSIONS
from rdss.model.errors import ErrorCode
from rdss.model.validation import validate
from rdss.observability.outside import message_fields

_APPLICATION = "rdss-cli"
#: Seconds ``rdss request`` waits for a reply unless told, as Gateway.request.
REQUEST_TIMEOUT = DEFAULT_TIMEOUT
_log = logging.getLogger("rdss.cli")


def register(commands: Any) -> None:
    send = add_command(commands, "send", run_send, help="send messages through the gateway")
    send.add_argument("files", nargs="+", metavar="FILE", type=file_name)
    add_sender_options(send, _APPLICATION)
    send.add_argument(
        "--auth-token-file",
        metavar="FILE",
        type=file_name,
        help="a file holding the JWT of the actor behind the messages (Mosaic's auth_token; read from a file so "
        "it never shows in the process list), sent beside every message: in the Mosaic envelope on amqp://",
    )
    send.add_argument(
        "--context",
        type=_json_object,
        metavar="JSON",
        help="Mosaic's message_context, a JSON object sent beside every message like the auth token",
    )

    tail = add_command(commands, "tail", run_tail, help="print the messages arriving on a channel")
    tail.add_argument("channel", metavar="CHANNEL")
    tail.add_argument("--from-start", action="store_true", help="begin with the oldest record kept")
    add_stop_options(tail, idle="without a record")
    add_poll_interval_option(tail)
    add_gateway_options(tail, _APPLICATION)
    _add_version_options(tail)

    ask = add_command(commands, "request", run_request, help="send a request and print its reply")
    ask.add_argument("file", metavar="FILE", type=file_name)
    add_number_option(
        ask, "--timeout", seconds(), default=REQUEST_TIMEOUT, metavar="S", help="seconds to wait for the reply"
    )
    ask.add_argument(
        "--reply-to",
        metavar="CHANNEL",
        help="the channel the reply comes to: FILE's returnAddress is set to CHANNEL before sending, replacing the one "
        "FILE names (rdss new writes responses); default: FILE's returnAddress, else responses",
    )
    add_poll_interval_option(ask)
    add_gateway_options(ask, _APPLICATION)
    _add_version_options(ask)


def _add_version_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reads",
        choices=VERSIONS,
        metavar="VERSION",
        help=f"print messages in this version of the Message API, translated where written in another "
        f"({', '.join(VERSIONS)}; default: as written)",
    )
    add_tenant_options(parser, of="of messages translated up to 4.0.0")


def run_send(args: argparse.Namespace) -> int:
    """Validate each FILE (- for standard input) and send it to CHANNEL: a file is one message, or newline-delimited
    JSON (a message a line, as rdss tail prints them; each named FILE:LINE). If any message is invalid nothing is sent
    (exit 1). A message over the limit goes as a multi-message sequence: consumers receive it reassembled, under the
    messageId of its first part and with messageSequence.sequence S (both printed; S is derived from the messageId it
    was sent as, by which rdss trace finds it too). A memory:// URL is refused (exit 2): its bus would end with this
    command, and what was sent with it.
    """
    configure_service_logging(args, args.application)
    names, payloads = _messages(args.files)
    token = _read(args.auth_token_file).decode("utf-8", "replace").strip() if args.auth_token_file else None
    if token == "":
        raise CommandError(f"{args.auth_token_file}: the auth token file is empty", USAGE)
    bus = _in_process_bus(args)
    with _gateway(args) as gateway:
        try:
            if bus is not None:
                gateway.sender.prepare(payloads, args.channel)  # judged as if sent: an invalid one is told first
                raise CommandError(
                    f"nothing sent: {bus} is a bus inside this process, which ends with this command, so nothing "
                    f"could read what was sent there; give a URL that keeps messages: {_KEEPING}",
                    USAGE,
                )
            receipts = gateway.send_all(payloads, channel=args.channel, auth_token=token, context=args.context)
        except MessageRefused as refused:
            for refusal in refused.refusals:
                # an array that is not JSON at all (nested too deep, cut short) is no list of messages
                array = payloads[refusal.index].lstrip()[:1] == b"[" and refusal.error_code != ErrorCode.GENERR007
                hint = _ARRAY_HINT if array else ""
                print(
                    safe(f"{names[refusal.index]}: {refusal.error_code} {refusal.error_description}{hint}"),
                    file=sys.stderr,
                )
            print(f"rdss send: nothing sent: {len(refused.refusals)} invalid message(s)", file=sys.stderr)
            return INVALID
        except SendFailed as failed:
            # the deployment unreachable or not there is the caller's to fix (exit 2), not a
            # verdict on the messages (exit 1: not acknowledged after every retry, or refused)
            unusable = bool(failed.failed) and all(aws_unusable(getattr(u, "error_code", "")) for u in failed.failed)
            raise CommandError(str(failed), USAGE if unusable else INVALID) from failed
        except ChannelMismatch as mismatch:
            raise CommandError(f"{names[mismatch.index]}: {mismatch}", USAGE) from mismatch
    for name, receipt in zip(names, receipts, strict=True):
        parts = (
            f" as {len(receipt.parts)} parts (sequence {receipt.sequence}; consumers receive it whole as message "
            f"{receipt.parts[0]} of sequence {receipt.sequence})"
            if receipt.split
            else ""
        )
        print(printable(f"{name}: sent {receipt.message_id} to {receipt.channel}{parts}"))
    return 0


#: What a refused JSON array is told: the messages it holds are sent one a line.
_ARRAY_HINT = (
    " (a JSON array: rdss send takes one message a file, or newline-delimited JSON, a message a line: "
    "jq -c '.[]' FILE > FILE.ndjson)"
)


def _messages(files: list[str]) -> tuple[list[str], list[bytes]]:
    """The messages the FILEs hold, each with the name it is reported under: a file's own, or
    FILE:LINE for each line of newline-delimited JSON."""
    names: list[str] = []
    payloads: list[bytes] = []
    for name in files:
        data = _read(name)
        lines = ndjson(data)
        if lines is None:
            names.append(name)
            payloads.append(data)
            continue
        for number, line in lines:
            names.append(f"{name}:{number}")
            payloads.append(line)
    return names, payloads


def run_tail(args: argparse.Namespace) -> int:
    """Print each record of CHANNEL as one JSON line as it arrives, every shard, parents before children. Reads without
    a consumer group: nothing is checkpointed or taken from other consumers. A memory:// URL is refused (exit 2): its
    bus would be this command's own, empty.
    """
    configure_service_logging(args, args.application)
    start: StartPosition = "earliest" if args.from_start else "latest"
    seen = 0
    bus = _in_process_bus(args)
    if bus is not None:
        raise CommandError(
            f"{bus} is a bus inside this process, which starts empty with this command: nothing was ever sent there "
            f"to tail; give the URL the messages were sent to: {_KEEPING}",
            USAGE,
        )
    with _gateway(args) as gateway:
        consumer = gateway.transport.consumer(args.channel, group=None, start=start)
        show = _in_version(args)
        try:
            idle_since = time.monotonic()
            while args.count is None or seen < args.count:
                deliveries = consumer.poll(100)
                for delivery in deliveries[: None if args.count is None else args.count - seen]:
                    shown = show(delivery)
                    if shown is not None:
                        sys.stdout.buffer.write(_line(shown) + b"\n")
                    _log.info("Message received", extra=_fields(delivery.payload, args.channel))
                    seen += 1
                sys.stdout.flush()
                if deliveries:
                    idle_since = time.monotonic()
                elif args.idle is not None and time.monotonic() - idle_since >= args.idle:
                    break
                else:
                    time.sleep(args.interval)
        finally:
            consumer.close()
    return 0


def run_request(args: argparse.Namespace) -> int:
    """Send the request in FILE (a MetadataRead or VocabularyRead Command) with a returnAddress and print the reply
    whose correlationId is its messageId. Exit 1 if none arrives within the timeout, or if the reply is a failure
    reply (its errorCode is printed); exit 2, sending nothing, if FILE is not a request (a Command that expects a
    reply: use rdss send for the others), or if the URL is memory:// (its bus would end with this command, and
    nothing in it could answer).
    """
    configure_service_logging(args, args.application)
    payload = _read(args.file)
    request: Sendable = payload if args.reply_to is None else _addressed_to(payload, args.reply_to)
    options = {"reads": args.reads, "tenant_jisc_id": args.tenant_jisc_id}
    bus = _in_process_bus(args)
    with _gateway(args, reply_poll_interval=args.interval, **options) as gateway:
        try:
            if bus is not None:
                gateway.sender.prepare([request], "input")  # judged as if sent: an invalid one is told first
                raise CommandError(
                    f"nothing sent: {bus} is a bus inside this process, which ends with this command, so nothing "
                    f"there could answer; give the URL of a deployment that answers: {_KEEPING}",
                    USAGE,
                )
            reply = gateway.request(request, args.timeout, reply_to=args.reply_to or _REPLY_TO)
        except MessageRefused as refused:
            raise CommandError(f"{args.file}: {refused}", INVALID) from refused
        except NotARequest as wrong:
            raise CommandError(f"{args.file}: {wrong}", USAGE) from wrong
        except translation.Untranslatable as error:
            raise CommandError(f"the reply has no form in {args.reads}: {error.code} {error}", INVALID) from error
        except RequestFailed as failed:  # the reply itself on stdout, the code on stderr
            print_json(failed.reply, indent=True)
            raise CommandError(f"the request failed: {failed}", INVALID) from failed
        except (RequestTimeout, SendFailed) as error:
            raise CommandError(str(error), INVALID) from error
    print_json(reply, indent=True)
    return 0


#: Where a reply comes when neither --reply-to nor the request names a returnAddress (the gateway's default).
_REPLY_TO = "responses"


def _addressed_to(payload: bytes, channel: str) -> Sendable:
    """The request with returnAddress ``channel``: an explicit ``--reply-to`` wins over the file's
    (:meth:`Gateway.request` keeps a returnAddress the request names, as a program that wrote one
    means it; a user giving the flag means the flag, and ``rdss new`` always writes one).

    Bytes that are no message with a header (not JSON, a member named twice) go as they are, for
    the classifier to refuse in its own words; so does a request already addressed there."""
    message = validate(payload, check_expiry=False, size_limit=None).message
    header = message.get("messageHeader") if isinstance(message, dict) else None
    if not isinstance(message, dict) or not isinstance(header, dict) or header.get("returnAddress") == channel:
        return payload
    return {**message, "messageHeader": {**header, "returnAddress": channel}}


def _in_version(args: argparse.Namespace) -> Callable[[Delivery], bytes | None]:
    """What ``tail`` prints of a record: its bytes, or with ``--reads`` the message translated; a
    record with no form in that version is named on standard error (tail moves nothing)."""

    def show(delivery: Delivery) -> bytes | None:
        if args.reads is None:
            return delivery.payload
        try:
            return translation.translate(delivery.payload, args.reads, tenant_jisc_id=args.tenant_jisc_id)
        except translation.Untranslatable as error:
            print(safe(f"record {delivery.id}: no form in {args.reads}: {error.code} {error}"), file=sys.stderr)
            return None

    return show


#: The URLs whose messages outlive the process that sent them.
_KEEPING = "kinesis://ENV?region=REGION or amqp://USER@HOST/VHOST (or start rdss local up)"


def _in_process_bus(args: argparse.Namespace) -> str | None:
    """The ``memory://`` URL the command is given when the process ends with the command (main
    run on this process's own command line): its bus is born and dies with it, so what is sent
    there is read by nothing, a request answered by nothing and a tail of it is empty. None
    otherwise, and for a URL that does not parse (the gateway says why when it is opened).

    A program that calls main with its arguments holds the bus on: its tests send and read so.
    """
    if not getattr(args, "one_shot", False):
        return None
    try:
        url = parse_url(deployment_url(args.url))
    except (URLError, CommandError):
        return None
    return url.raw if url.scheme == "memory" else None


@contextmanager
def _gateway(args: argparse.Namespace, **options: Any) -> Iterator[Gateway]:
    """A gateway for the command, with the messaging system's failures as one-line errors."""
    try:
        with Gateway(deployment_url(args.url), application=args.application, **options) as gateway:
            yield gateway
    except (URLError, TransportError) as error:
        raise CommandError(str(error), USAGE) from error
    except (ClientError, BotoCoreError) as error:
        raise CommandError(describe(error), USAGE) from error
    except GatewayError as error:
        raise CommandError(str(error), INVALID) from error


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('a JSON object, e.g. {"ingest": 7}')
    data = text.encode("utf-8")
    if not jsonkeys.has_unique_names(data, value):  # which one a reader keeps is a guess, as in a message
        found = jsonkeys.first_duplicate(data)
        where = f"{found[1]!r}" if found else "a member"
        raise argparse.ArgumentTypeError(f"the JSON object names {where} more than once")
    return value


def _read(name: str) -> bytes:
    try:
        return read_input(name)
    except OSError as error:
        raise CommandError(describe_os_error(error), USAGE) from error


def _fields(payload: bytes, channel: str) -> dict[str, Any]:
    """The log fields of a record ``tail`` printed (whatever it holds)."""
    try:
        header = orjson.loads(payload).get("messageHeader")
    except (orjson.JSONDecodeError, AttributeError):
        header = None
    return message_fields(header if isinstance(header, dict) else {}, channel)


def _line(payload: bytes) -> bytes:
    """A record as one line: compact JSON, or the bytes themselves when they are not JSON, control
    characters escaped either way."""
    try:
        return printable_json(orjson.dumps(orjson.loads(payload)))
    except orjson.JSONDecodeError:  # the bytes as they are, escaped: no control byte reaches the terminal
        return printable(payload.decode("utf-8", "backslashreplace")).encode("utf-8")
