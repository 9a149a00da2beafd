"""The message classifier: one verdict per payload, the same everywhere.

The broker, the sequencer, the gateway, ``rdss validate`` and the tests all call
:func:`validate`. It implements the classification table of ARCHITECTURE.md: the payload passes
through the stages below in order and the first failing stage names the error code.

======== ============================================================ =========
stage    fault                                                        code
======== ============================================================ =========
parse    not UTF-8 JSON; an object naming a member twice              GENERR007
envelope not an object; messageHeader missing or not an object        GENERR004
header   a header UUID malformed                                      GENERR010
header   any other header fault (schema and semantic rules)           GENERR004
type     messageType (or its class) not supported                     GENERR002
size     a whole message over 1,000,000 bytes                         GENERR006
expiry   expirationTimestamp already passed                           GENERR003
body     a body UUID malformed                                        GENERR010
body     body missing or not matching its schema                      GENERR001
======== ============================================================ =========

The version a message's header declares chooses the schemas it is judged against
(:func:`rdss.model.schemas.for_version`: MAJOR 4 is 4.0.0, any other 3.0.2); the stages and the
codes are the same for both, and the verdict names the version (:attr:`Verdict.version`). A
payload whose header cannot be read is judged as 3.0.2, as every payload was before 4.0.0.

A failure reply - a Document answering a request (correlationId) with an ``errorCode`` and
``errorDescription``, the gateway's ``reply_error`` - carries the body of the request it could
not answer (``{"objectUuid": ...}`` for a MetadataRead), so its body is checked as the request's -
or as the response's, which the published schemas (knowing only the response) accept too.

Most messages are valid, so :func:`validate` first tries the valid path: one orjson parse, one
``is_valid`` call of the jsonschema-rs validator compiled for the message's (messageType,
messageClass) over header and body together, and the checks JSON Schema cannot state (position
<= total, size, expiry). Only a payload that fails it is walked stage by stage to find the first
failing stage and describe the fault. The same code runs in the CLI, the broker and Lambda.

The classifier is total: every byte string gets a verdict and none raises. A duplicate member
name is found without a second parse (:mod:`rdss.model.jsonkeys`); numbers orjson cannot hold exactly
(10^400, integers beyond 64 bits) are re-read exactly; a timestamp :class:`datetime` cannot hold
(year 0000, a leap second, an offset beyond its range) is judged by the schema's RFC 3339 format
and compared for expiry by arithmetic (:func:`rdss.model.timestamps.epoch_microseconds`). Should the
classifier itself fail, the payload gets GENERR009 (the error channel) and the failure is logged.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import orjson

from rdss import MAX_MESSAGE_BYTES, MAX_SEQUENCE_PARTS
from rdss.model import jsonkeys, schemas, timestamps
from rdss.model.errors import ChannelKind, ErrorCode

if TYPE_CHECKING:  # loaded with the first validator compiled (rdss.model.schemas.registry)
    import jsonschema_rs

#: Longest errorDescription produced; instance values quoted in a description are cut to fit.
MAX_DESCRIPTION = 500

_READS = frozenset({"MetadataRead", "VocabularyRead"})

# The 3.0.2 types with no form in 4.0.0 (the Vocabulary types): named as such, not as unknown.
_GONE_IN_4 = frozenset(schemas.V3.message_types) - frozenset(schemas.V4.message_types)

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class Verdict:
    """What the classifier decided about one payload. Treat it as read-only.

    (Not a frozen dataclass: constructing those costs three times as much, and one verdict is
    built per message on the hot path.)
    """

    #: None when the message is valid, else the code of the first failing stage.
    error_code: ErrorCode | None
    #: Names the field and the rule that failed; None when valid.
    error_description: str | None
    #: The parsed message (a dict), or None when the payload is not a JSON object.
    message: dict[str, Any] | None
    #: True for one part of a multi-message sequence (``messageSequence.total`` > 1).
    is_part: bool = False
    #: The version of the Message API the message was judged against (``"3.0.2"``, ``"4.0.0"``).
    version: str = schemas.V3.version

    @property
    def valid(self) -> bool:
        """True when the message passed every stage."""
        return self.error_code is None

    @property
    def channel(self) -> ChannelKind | None:
        """The invalid or error channel for a failed message; None for a valid one."""
        return None if self.error_code is None else self.error_code.channel

    @property
    def header(self) -> dict[str, Any] | None:
        """The messageHeader when it is an object."""
        header = self.message.get("messageHeader") if self.message is not None else None
        return header if type(header) is dict else None


def validate(
    payload: bytes | bytearray | memoryview | str,
    *,
    now: datetime | None = None,
    check_expiry: bool = True,
    size_limit: int | None = MAX_MESSAGE_BYTES,
) -> Verdict:
    """Classify one serialised message: a verdict for any payload, never an exception.

    Args:
        payload: the message as it travels (UTF-8 JSON bytes; ``str`` is encoded first).
        now: the moment delivery is attempted, for the expiry stage (aware; default: now).
        check_expiry: False skips the expiry stage (``rdss validate --no-expiry``).
        size_limit: the byte limit for a whole message; None skips the size stage (a message
            reassembled from a sequence may exceed it).
    """
    if now is not None and now.tzinfo is None:  # the caller's mistake, not the payload's
        raise ValueError("now must be an aware datetime")
    try:
        if isinstance(payload, str):
            payload = payload.encode("utf-8", "surrogatepass")
        try:
            message = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return _Classifier(payload, now, check_expiry, size_limit).classify(None)
        if not jsonkeys.has_unique_names(payload, message):
            return _Classifier(payload, now, check_expiry, size_limit).duplicate_names()
        verdict = _fast(message, payload, now, check_expiry, size_limit)
        if verdict is not None:
            return verdict
        return _Classifier(payload, now, check_expiry, size_limit).classify(message)
    except Exception as error:  # a verdict for every payload, whatever went wrong
        return _unexpected(error)


def validate_message(message: dict[str, Any], *, now: datetime | None = None, check_expiry: bool = True) -> Verdict:
    """Classify an already parsed message (e.g. one reassembled from a sequence); no size stage."""
    if now is not None and now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    try:
        verdict = _fast(message, b"", now, check_expiry, None)
        if verdict is not None:
            return verdict
        return _Classifier(b"", now, check_expiry, None).classify(message)
    except Exception as error:  # a verdict for every message, whatever went wrong
        return _unexpected(error)


def _unexpected(error: Exception) -> Verdict:
    """The verdict when classifying itself failed - a bug, never a message's fault alone: the
    message goes to the error channel (GENERR009, the spec's unexpected error) rather than
    taking its batch down, and the failure is logged with its traceback."""
    _log.error("the classifier failed: %s: %s", type(error).__name__, error, exc_info=error)
    return _fail(ErrorCode.GENERR009, None, f"message: the classifier failed ({type(error).__name__}: {error})")


# The whole-message validator by (messageType, messageClass, is part, schema set); None marks a
# pair the system does not support. Filled on first use, so a Lambda compiles only what it meets.
_VALIDATORS: dict[tuple[Any, Any, bool, schemas.SchemaSet], jsonschema_rs.Validator | None] = {}


def _validator(
    message_type: Any, message_class: Any, part: bool, spec: schemas.SchemaSet = schemas.V3
) -> jsonschema_rs.Validator | None:
    key = (message_type, message_class, part, spec)
    try:
        return _VALIDATORS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable messageType or messageClass: the staged walk explains
        return None
    if type(message_type) is not str or type(message_class) is not str:
        return None
    checker = spec.message_validator(message_type, message_class, part)
    if len(_VALIDATORS) < 256:  # garbage types must not grow the table without bound
        _VALIDATORS[key] = checker
    return checker


def _fast(
    message: Any,
    payload: bytes | bytearray | memoryview,
    now: datetime | None,
    check_expiry: bool,
    size_limit: int | None,
) -> Verdict | None:
    """The verdict for a valid message, or None when the staged walk must decide.

    Kept to a handful of operations around one call into the compiled validator: it runs
    for every message the system sees.
    """
    if type(message) is not dict:
        return None
    header = message.get("messageHeader")
    if type(header) is not dict:
        return None
    try:
        sequence = header["messageSequence"]
        total = sequence["total"]
        message_class = header["messageClass"]
        spec = schemas.for_version(header.get("version"))
        classes = _body_classes(header, spec) if "errorCode" in header else (message_class,)
        for body_class in classes:
            checker = _validator(header["messageType"], body_class, total != 1, spec)
            if checker is not None and checker.is_valid(message):
                break
        else:
            return None
    except (KeyError, TypeError, ValueError, OverflowError):  # the staged walk names the fault
        return None
    # the schema has checked position and total are integers of at least 1
    if sequence["position"] > total:
        return None
    is_part = total > 1
    if size_limit is not None and not is_part and len(payload) > size_limit:
        return None
    if check_expiry:
        expiration = header["messageTimings"].get("expirationTimestamp")
        if expiration is not None and _expired(expiration, now):
            return None
    return Verdict(None, None, message, is_part, spec.version)


def _expired(expiration: str, now: datetime | None) -> bool:
    moment = now if now is not None else timestamps.now()
    if moment.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    try:
        return datetime.fromisoformat(expiration) <= moment
    except (ValueError, OverflowError):
        pass
    # What datetime cannot hold but RFC 3339 allows (year 0000, a leap second, an offset carrying
    # year 1 or 9999 past its range), compared by arithmetic. The schema has checked the shape.
    try:
        return timestamps.epoch_microseconds(expiration) <= timestamps.microseconds_of(moment)
    except ValueError:
        return False


class _Classifier:
    """The staged walk: the first failing stage of the classification table wins."""

    def __init__(
        self,
        payload: bytes | bytearray | memoryview,
        now: datetime | None,
        check_expiry: bool,
        size_limit: int | None,
    ) -> None:
        self.payload = payload
        self.now = now
        self.check_expiry = check_expiry
        self.size_limit = size_limit
        #: The schemas judging the message: its header's declared version's, once it has a header.
        self.spec = schemas.V3

    def _fail(
        self, code: ErrorCode, message: dict[str, Any] | None, description: str, is_part: bool = False
    ) -> Verdict:
        return Verdict(code, description[:MAX_DESCRIPTION], message, is_part, self.spec.version)

    def _pass(self, message: dict[str, Any], is_part: bool) -> Verdict:
        return Verdict(None, None, message, is_part, self.spec.version)

    def classify(self, message: Any) -> Verdict:
        if message is None or (self.payload and _LONG_NUMBER.search(self.payload)):
            # not parsed, or parsed with a number orjson could not hold exactly (it reads an
            # integer beyond 64 bits as a float): judge what the text says
            parsed = self._parse()
            if isinstance(parsed, Verdict):
                return parsed
            message = parsed
        return self._envelope(message)

    def duplicate_names(self) -> Verdict:
        """The parse stage's verdict on a text whose objects name a member twice."""
        found = jsonkeys.first_duplicate(self.payload)
        description = jsonkeys.describe(*found) if found else "payload: an object names a member more than once"
        return _fail(ErrorCode.GENERR007, None, description)

    # -- parse ---------------------------------------------------------------------------------
    def _parse(self) -> Any:
        payload = bytes(self.payload)
        if not payload.strip():
            return _fail(ErrorCode.GENERR007, None, "payload: empty, expected a JSON object")
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError as error:
            reason = f"not UTF-8: byte 0x{payload[error.start]:02x} at offset {error.start}"
            return _fail(ErrorCode.GENERR007, None, f"payload: malformed JSON: {reason}")
        try:
            parsed = orjson.loads(payload)
        except orjson.JSONDecodeError as error:
            reason = str(error)
            if "number" not in reason:
                return _fail(ErrorCode.GENERR007, None, f"payload: malformed JSON: {reason}")
        else:
            if not _LONG_NUMBER.search(payload):
                return parsed
        # orjson refuses numbers beyond a double (10^400) and rounds integers beyond 64 bits;
        # RFC 8259 allows both. The standard library keeps integers exact (given text, so that
        # it does not skip a byte order mark as it would in bytes).
        try:
            return json.loads(payload.decode("utf-8"), parse_float=_float, parse_constant=_no_constant)
        except RecursionError:
            reason = "nested too deeply"
        except ValueError as error:
            reason = str(error)
        return _fail(ErrorCode.GENERR007, None, f"payload: malformed JSON: {reason}")

    # -- envelope ------------------------------------------------------------------------------
    def _envelope(self, message: Any) -> Verdict:
        if type(message) is not dict:
            kind = _json_kind(message)
            return _fail(ErrorCode.GENERR004, None, f"message: a JSON {kind}, expected an object")
        if "messageHeader" not in message:
            return _fail(ErrorCode.GENERR004, message, "messageHeader: required, missing")
        header = message["messageHeader"]
        if type(header) is not dict:
            kind = _json_kind(header)
            return _fail(ErrorCode.GENERR004, message, f"messageHeader: a JSON {kind}, expected an object")
        self.spec = schemas.for_version(header.get("version"))
        extra = sorted(set(message) - {"messageHeader", "messageBody"})
        if extra:
            return self._fail(
                ErrorCode.GENERR004,
                message,
                f"message: unexpected member {extra[0]!r}; a message holds messageHeader and messageBody only",
            )
        return self._header(message, header)

    # -- header --------------------------------------------------------------------------------
    def _header(self, message: dict[str, Any], header: dict[str, Any]) -> Verdict:
        errors = _errors(self.spec.validator(schemas.HEADER), header)
        uuid_errors = [e for e in errors if _is_uuid_error(e, self.spec)]
        if uuid_errors:
            return self._fail(ErrorCode.GENERR010, message, _describe(uuid_errors[0], "messageHeader", self.spec))
        # An unknown messageType is the type stage's business (GENERR002), not a header fault.
        faults = [e for e in errors if list(e.instance_path)[:1] != ["messageType"]]
        if faults:
            return self._fail(ErrorCode.GENERR004, message, _describe(faults[0], "messageHeader", self.spec))
        sequence = header["messageSequence"]
        position, total = sequence["position"], sequence["total"]
        if position > total:
            return self._fail(
                ErrorCode.GENERR004,
                message,
                f"messageHeader.messageSequence.position: {position} is outside 1..total ({total})",
            )
        return self._type(message, header, is_part=total > 1)

    # -- type ----------------------------------------------------------------------------------
    def _type(self, message: dict[str, Any], header: dict[str, Any], is_part: bool) -> Verdict:
        message_type, message_class = header["messageType"], header["messageClass"]
        spec = self.spec
        # All three faults are one verdict (GENERR002, "not supported"); only the wording differs.
        if spec is schemas.V4 and type(message_type) is str and message_type in _GONE_IN_4:
            problem = (
                f"messageHeader.messageType: {message_type} has no form in {spec.version}: the Vocabulary "
                f"message types are gone in {spec.version} ({', '.join(spec.message_types)}); a vocabulary "
                f"message declares version {schemas.V3.version}"
            )
        elif type(message_type) is not str or message_type not in spec.message_types:
            supported = ", ".join(spec.message_types)
            problem = f"messageHeader.messageType: {_quote(message_type)} is not a supported message type ({supported})"
            if spec is not schemas.V3:
                problem += f" in version {spec.version}"
        elif spec.body_schema(message_type, message_class) is None:
            classes = " or ".join(spec.classes_for(message_type))
            problem = (
                f"messageHeader.messageClass: {message_type} is not supported as {_article(message_class)} "
                f"{message_class} ({classes} only)"
            )
        else:
            return self._size(message, header, is_part)
        return self._fail(ErrorCode.GENERR002, message, problem, is_part)

    # -- size ----------------------------------------------------------------------------------
    def _size(self, message: dict[str, Any], header: dict[str, Any], is_part: bool) -> Verdict:
        size = len(self.payload)
        if self.size_limit is not None and not is_part and size > self.size_limit:
            return self._fail(
                ErrorCode.GENERR006,
                message,
                f"message: {size:,} bytes serialised, over the {self.size_limit:,}-byte limit; "
                "send it as a multi-message sequence",
            )
        return self._expiry(message, header, is_part)

    # -- expiry --------------------------------------------------------------------------------
    def _expiry(self, message: dict[str, Any], header: dict[str, Any], is_part: bool) -> Verdict:
        expiration = header["messageTimings"].get("expirationTimestamp")
        if self.check_expiry and expiration is not None and _expired(expiration, self.now):
            moment = timestamps.format(self.now or timestamps.now())
            return self._fail(
                ErrorCode.GENERR003,
                message,
                f"messageHeader.messageTimings.expirationTimestamp: {expiration} had passed when delivery "
                f"was attempted ({moment})",
                is_part,
            )
        return self._body(message, header, is_part)

    # -- body ----------------------------------------------------------------------------------
    def _body(self, message: dict[str, Any], header: dict[str, Any], is_part: bool) -> Verdict:
        if "messageBody" not in message:
            return self._fail(ErrorCode.GENERR001, message, "messageBody: required, missing", is_part)
        body = message["messageBody"]
        if is_part:
            if type(body) is not str:
                return self._fail(
                    ErrorCode.GENERR001,
                    message,
                    f"messageBody: a JSON {_json_kind(body)}; a sequence part carries a string fragment of the body",
                    is_part,
                )
            return self._pass(message, is_part)
        errors: list[jsonschema_rs.ValidationError] = []
        for body_class in _body_classes(header, self.spec):
            schema = self.spec.body_schema(header["messageType"], body_class)
            assert schema is not None  # the type stage has checked the pair
            found = self._form_errors(_errors(self.spec.validator(schema), body), body)
            if not found:
                return self._pass(message, is_part)
            errors = errors or found  # the first form's faults describe the body
        uuid_errors = [e for e in errors if _is_uuid_error(e, self.spec)]
        if uuid_errors:
            return self._fail(ErrorCode.GENERR010, message, _describe(uuid_errors[0], "messageBody", self.spec))
        if errors:
            return self._fail(ErrorCode.GENERR001, message, _describe(errors[0], "messageBody", self.spec))
        return self._pass(message, is_part)

    def _form_errors(
        self, errors: list[jsonschema_rs.ValidationError], body: Any
    ) -> list[jsonschema_rs.ValidationError]:
        """A 4.0.0 research object body may take any of four forms (``anyOf``), and a body that
        fits none fails as a whole - which would hide a malformed UUID (GENERR010) and name no
        field. The form its objectResourceType names (dataset, article, thesisDissertation; the
        general research object otherwise) explains the failure instead."""
        if not errors or self.spec is not schemas.V4 or list(errors[0].instance_path):
            return errors
        if not (errors[0].absolute_keyword_location or "").endswith("#/anyOf"):
            return errors
        kind = body.get("objectResourceType") if type(body) is dict else None
        form = _FORMS_4.get(kind, _RESEARCH_OBJECT_4) if type(kind) is str else _RESEARCH_OBJECT_4
        return _errors(self.spec.validator(form), body) or errors


#: The research object forms of 4.0.0 by the objectResourceType they are for.
_RESEARCH_OBJECT_4 = "model/research-object.json#/$defs/researchObject"
_FORMS_4 = {
    "dataset": "model/dataset.json#/$defs/dataset",
    "article": "model/article.json#/$defs/article",
    "thesisDissertation": "model/thesis-dissertation.json#/$defs/thesisDissertation",
}


def _body_classes(header: dict[str, Any], spec: schemas.SchemaSet) -> tuple[str, ...]:
    """The classes whose body schemas a body may match (the first describes its faults): a failure
    reply's body is its request's (as failure_reply writes it) or the response's."""
    message_class: str = header["messageClass"]
    if (
        message_class == "Document"
        and header.get("errorCode")
        and header.get("correlationId")
        and spec.body_schema(header["messageType"], "Command") is not None
    ):
        return ("Command", "Document")
    return (message_class,)


def _fail(code: ErrorCode, message: dict[str, Any] | None, description: str, is_part: bool = False) -> Verdict:
    return Verdict(code, description[:MAX_DESCRIPTION], message, is_part)


def _errors(checker: jsonschema_rs.Validator, instance: Any) -> list[jsonschema_rs.ValidationError]:
    import jsonschema_rs  # loaded already: the checker is one of its validators

    try:
        return list(checker.iter_errors(instance))
    except jsonschema_rs.ValidationError as error:
        return [error]
    except (ValueError, OverflowError) as error:
        # e.g. an integer beyond 64 bits, which the compiled validator cannot represent
        return [_Unrepresentable(str(error))]  # type: ignore[list-item]


class _Unrepresentable:
    """Stands in for a validation error when a value cannot be checked at all."""

    instance_path: tuple[str, ...] = ()
    absolute_keyword_location = None

    def __init__(self, reason: str) -> None:
        self.message = f"a value cannot be checked: {reason}"


def _is_uuid_error(error: jsonschema_rs.ValidationError, spec: schemas.SchemaSet) -> bool:
    location = error.absolute_keyword_location
    return location is not None and location.startswith(spec.base + schemas.UUID)


def _describe(error: jsonschema_rs.ValidationError, root: str, spec: schemas.SchemaSet) -> str:
    """``<field path>: <rule that failed>``, the path in dotted form from the message root."""
    path = _path(root, error.instance_path)
    # where the rule lies within its set: both sets name their shared types alike
    location = (error.absolute_keyword_location or "").removeprefix(spec.base)
    if location.endswith("/then/required"):
        reads = " or ".join(t for t in spec.message_types if t in _READS)
        return f"{path}.correlationId: required on a Document answering a {reads} (it carries the request's messageId)"
    if location.startswith(schemas.UUID):
        return f"{path}: {_quote(error.instance)} is not a UUID (RFC 4122 version 1-5, lower-case 8-4-4-4-12 hex)"
    if location.startswith(_ADDRESS_LOCATION):
        return f"{path}: {_quote(error.instance)} is not a host name, IPv4 or IPv6 address"
    if location.startswith(_SEMVER_LOCATION):
        return f"{path}: {_quote(error.instance)} is not a semantic version (MAJOR.MINOR.PATCH)"
    if location.startswith(_TIMESTAMP_LOCATION):  # its pattern or its format
        return f"{path}: {_quote(error.instance)} is not a date-time (RFC 3339: date, time and zone)"
    if location.startswith(_INTEGER_LOCATION):
        return f"{path}: {_quote(error.instance)} is not an integer (a number written without a fraction)"
    if location == _TOTAL_MAXIMUM:
        return (
            f"{path}: {_quote(error.instance)} parts is more than a sequence may have (at most "
            f"{MAX_SEQUENCE_PARTS:,}: no sequence that long could be held whole to be reassembled)"
        )
    return f"{path}: {error.message}"


# Locations within a set (its base removed): the 4.0.0 set keeps 3.0.2's names for these.
_ADDRESS_LOCATION = "model/types.json#/$defs/ipOrHostname"
_SEMVER_LOCATION = "model/types.json#/$defs/semVer"
_TIMESTAMP_LOCATION = "model/types.json#/$defs/timestamp"
_INTEGER_LOCATION = schemas.INTEGER
_TOTAL_MAXIMUM = "message/header.json#/$defs/messageSequence/properties/total/maximum"


def _path(root: str, parts: Iterable[str | int]) -> str:
    path = root
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _quote(value: Any) -> str:
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() if value is not None else "null"
    except (orjson.JSONEncodeError, TypeError):  # an integer beyond 64 bits, a Decimal
        text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


# A number with more digits than orjson holds exactly (19 reach 2^63), outside any string
# only approximately: a string of digits merely costs an exact re-parse.
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def _float(text: str) -> float | Decimal:
    number = float(text)
    if math.isfinite(number):
        return number
    try:
        return Decimal(text)  # 1e400: kept, not infinity
    except InvalidOperation:  # an exponent beyond any decimal's (10^(10^18)): no value to judge
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"the number {shown} is beyond any exponent a number can hold") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float, Decimal)):  # Decimal: a number beyond a double's range (1e400)
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
