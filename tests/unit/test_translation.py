"""The Message Translators (rdss.model.translation): every mapping docs/vendors.md "Versions"
lists, the refusals, and the property that any valid 3.0.2 message goes to a valid 4.0.0 one and
back to a valid 3.0.2 one with its messageId and object identity kept."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.model import schemas
from rdss.model.errors import ErrorCode
from rdss.model.translation import Untranslatable, read, translate
from rdss.model.validation import validate
from rdss.model.workload import Workload
from tests.conftest import valid_examples

TENANT = 4242
_ENUMERATIONS = schemas.documents()["model/enumerations.json"]["$defs"]


def _code(name: str, value: str) -> int:
    return schemas.enumeration_names(name).index(value) + 1


def _dumps(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


def _up(message: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return orjson.loads(translate(_dumps(message), "4.0.0", tenant_jisc_id=TENANT, **kwargs))


def _down(message: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(translate(_dumps(message), "3.0.2"))


def _valid(message: dict[str, Any]) -> bool:
    verdict = validate(_dumps(message), check_expiry=False)
    assert verdict.valid, (verdict.error_code, verdict.error_description)
    return True


def _create(seed: int = 1, **kwargs: Any) -> dict[str, Any]:
    return Workload(seed).message("MetadataCreate", "Command", **kwargs)


# -- the header ------------------------------------------------------------------------------------


def test_up_keeps_the_ids_and_names_the_tenant_and_the_translation_as_a_hop() -> None:
    request = Workload(3).message("MetadataRead", "Document")
    up = _up(request)
    header, original = up["messageHeader"], request["messageHeader"]
    assert header["messageId"] == original["messageId"]
    assert header["correlationId"] == original["correlationId"]
    assert header["messageSequence"] == original["messageSequence"]
    assert header["version"] == "4.0.0"
    assert header["tenantJiscID"] == TENANT
    [hop] = header["messageHistory"]
    assert hop["machineId"] == "rdss-translate-3.0.2-to-4.0.0"
    assert list(header).index("messageHistory") < list(header).index("version")
    down = _down(up)["messageHeader"]
    assert "tenantJiscID" not in down
    assert down["version"] == "3.0.2"
    assert [h["machineId"] for h in down["messageHistory"]] == [
        "rdss-translate-3.0.2-to-4.0.0",
        "rdss-translate-4.0.0-to-3.0.2",
    ]


def test_a_tenant_the_message_carries_wins_and_none_at_all_is_refused() -> None:
    up = _up(_create())
    up["messageHeader"]["tenantJiscID"] = 7
    assert _up(_down(up))["messageHeader"]["tenantJiscID"] == TENANT  # 3.0.2 cannot keep it
    with pytest.raises(Untranslatable) as refused:
        translate(_dumps(_create()), "4.0.0")
    assert refused.value.code == ErrorCode.GENERR004
    assert "tenant_jisc_id" in refused.value.description


def test_expiry_is_never_judged_and_error_fields_are_kept() -> None:
    message = _create()
    message["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2001-01-01T00:00:00Z"
    message["messageHeader"]["errorCode"] = "GENERR003"
    message["messageHeader"]["errorDescription"] = "expired"
    up = _up(message)["messageHeader"]
    assert up["messageTimings"]["expirationTimestamp"] == "2001-01-01T00:00:00Z"
    assert (up["errorCode"], up["errorDescription"]) == ("GENERR003", "expired")


def test_the_same_major_version_comes_back_byte_for_byte() -> None:
    payload = _dumps(_create())
    assert translate(payload, "3.0.2") is payload
    up = translate(payload, "4.0.0", tenant_jisc_id=TENANT)
    assert translate(up, "4.0.0") is up


# -- the body ---------------------------------------------------------------------------------------


def test_enumerations_become_names_and_uuid_members_are_spelt_as_4_0_0_spells_them() -> None:
    message = _create(5)
    body = message["messageBody"]
    body["objectPersonRole"][0]["person"]["personIdentifier"][0]["personIdentifierType"] = 2
    up = _up(message)["messageBody"]
    assert up["objectUUID"] == body["objectUuid"]
    assert "objectUuid" not in up
    assert up["objectResourceType"] == "dataset"
    assert up["objectValue"] == "normal"
    assert up["objectRights"]["access"][0]["accessType"] == "open"
    person = up["objectPersonRole"][0]["person"]
    assert person["personUUID"] == body["objectPersonRole"][0]["person"]["personUuid"]
    assert person["personIdentifier"][0]["personIdentifierType"] == "researcherID"  # researcherId in 3.0.2
    assert person["personOrganisationUnit"]["organisation"]["organisationType"] == "higherEducation"
    assert up["objectOrganisationRole"][0]["role"] == "hostingInstitution"
    assert up["objectKeyword"] == body["objectKeywords"]
    assert _down(_up(message))["messageBody"] == _expected_back(body)


def test_the_description_goes_up_as_one_typed_entry_and_down_as_the_values_joined() -> None:
    message = _create()
    up = _up(message)
    assert up["messageBody"]["objectDescription"] == [
        {"descriptionValue": message["messageBody"]["objectDescription"], "descriptionType": "description"}
    ]
    up["messageBody"]["objectDescription"].append({"descriptionValue": "Methods.", "descriptionType": "methods"})
    down = _down(up)["messageBody"]
    assert down["objectDescription"] == message["messageBody"]["objectDescription"] + "\n\nMethods."
    up["messageBody"]["objectDescription"] = []
    with pytest.raises(Untranslatable, match="objectDescription is empty"):
        _down(up)


def test_preservation_events_are_lost_going_up_and_invented_going_down() -> None:
    message = _create(8)
    workload = Workload(8)
    body = message["messageBody"]
    body["objectFile"] = [workload.file(0)]
    body["objectFile"][0]["filePreservationEvent"].append(
        {"preservationEventValue": "checked", "preservationEventType": _code("preservationEventType", "fixityCheck")}
    )
    body["objectPreservationEvent"] = [{"preservationEventValue": "made", "preservationEventType": 3}]
    up = _up(message)["messageBody"]
    assert "objectPreservationEvent" not in up
    assert up["objectFile"][0]["filePreservationEvent"] == "ingest; checked"
    file = _down(_up(message))["messageBody"]["objectFile"][0]
    assert file["filePreservationEvent"] == [
        {
            "preservationEventType": _code("preservationEventType", "creation"),
            "preservationEventValue": "ingest; checked",
        }
    ]
    up_message = _up(message)
    del up_message["messageBody"]["objectFile"][0]["filePreservationEvent"]
    [event] = _down(up_message)["messageBody"]["objectFile"][0]["filePreservationEvent"]
    assert event["preservationEventValue"] == "not recorded in 4.0.0"


def test_values_4_0_0_lacks_are_replaced_or_refused() -> None:
    message = _create(9)
    body = message["messageBody"]
    body["objectResourceType"] = _code("resourceType", "equipment")
    body["objectPersonRole"][0]["role"] = 22  # reserved by 3.0.2, never named
    up = _up(message)["messageBody"]
    assert up["objectResourceType"] == "other"
    assert up["objectPersonRole"][0]["role"] == "other"
    body["objectPersonRole"][0]["person"]["personIdentifier"][0]["personIdentifierType"] = 5
    with pytest.raises(Untranslatable) as refused:
        _up(message)
    assert refused.value.code == ErrorCode.GENERR001
    assert "personIdentifierType 5" in refused.value.description


@pytest.mark.parametrize(
    ("member", "kind", "value"),
    [("objectDate", "dateType", "awarded"), ("objectOrganisationRole", "role", "awardingInstitution")],
)
def test_entries_of_a_kind_3_0_2_lacks_are_dropped_and_refused_when_none_is_left(
    member: str, kind: str, value: str
) -> None:
    up = _up(_create(10))
    entries = up["messageBody"][member]
    entries.append({**copy.deepcopy(entries[0]), kind: value})
    _valid(up)
    down = _down(up)
    _valid(down)
    assert len(down["messageBody"][member]) == len(entries) - 1
    up["messageBody"][member] = entries[1:]
    _valid(up)
    with pytest.raises(Untranslatable) as refused:
        _down(up)
    assert refused.value.code == ErrorCode.GENERR001
    assert f"{member} holds only {value}" in refused.value.description


def test_relations_3_0_2_lacks_are_dropped_and_uuid_identifiers_become_urns() -> None:
    up = _up(_create(10))
    body = up["messageBody"]
    body["objectRelatedIdentifier"] = [
        {"identifier": {"identifierValue": "an-aip", "identifierType": "URL"}, "relationType": "isAIPOf"},
        {"identifier": {"identifierValue": "10.1/x", "identifierType": "DOI"}, "relationType": "cites"},
    ]
    body["objectIdentifier"].append({"identifierValue": body["objectUUID"], "identifierType": "UUID"})
    _valid(up)
    down = _down(up)["messageBody"]
    assert down["objectRelatedIdentifier"] == [
        {
            "identifier": {"identifierValue": "10.1/x", "identifierType": _code("identifierType", "DOI")},
            "relationType": 1,
        }
    ]
    assert down["objectIdentifier"][-1] == {
        "identifierValue": f"urn:uuid:{body['objectUUID']}",
        "identifierType": _code("identifierType", "URN"),
    }


def test_what_3_0_2_requires_and_4_0_0_does_not_is_invented_or_refused() -> None:
    up = _up(_create(11))
    body = up["messageBody"]
    del body["objectValue"]
    body["objectResourceType"] = "informationPackage"
    organisation = body["objectOrganisationRole"][0]["organisation"]
    del organisation["organisationType"], organisation["organisationAddress"]
    _valid(up)
    down = _down(up)
    _valid(down)
    assert down["messageBody"]["objectValue"] == _code("objectValue", "normal")
    assert down["messageBody"]["objectResourceType"] == _code("resourceType", "other")
    assert down["messageBody"]["objectOrganisationRole"][0]["organisation"]["organisationType"] == _code(
        "organisationType", "other"
    )
    dataset = _up(_create(12))
    dataset["messageBody"].update(language=["en"], version="2")  # a 4.0.0 Dataset's members
    _valid(dataset)
    down = _down(dataset)
    _valid(down)
    assert "language" not in down["messageBody"]
    assert "version" not in down["messageBody"]
    del body["objectPersonRole"][0]["person"]["personOrganisationUnit"]
    _valid(up)
    person = _down(up)["messageBody"]["objectPersonRole"][0]["person"]
    unit = person["personOrganisationUnit"]  # invented: the object's first organisation
    assert unit["organisationUnitName"] == "not recorded in 4.0.0"
    assert unit["organisation"]["organisationName"] == organisation["organisationName"]
    assert (
        unit == _down(up)["messageBody"]["objectPersonRole"][0]["person"]["personOrganisationUnit"]
    )  # the same each time


# -- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message_type", "message_class"), [("VocabularyRead", "Command"), ("VocabularyPatch", "Event")]
)
def test_a_vocabulary_message_has_no_form_in_4_0_0(message_type: str, message_class: str) -> None:
    with pytest.raises(Untranslatable) as refused:
        _up(Workload(12).message(message_type, message_class))
    assert refused.value.code == ErrorCode.GENERR002
    assert message_type in str(refused.value)


def test_a_preservation_event_has_no_form_in_3_0_2() -> None:
    event = _up(_create(13))
    event["messageHeader"]["messageType"] = "PreservationEvent"
    event["messageBody"] = {
        "objectUUID": event["messageBody"]["objectUUID"],
        "packageUUID": "5680e8e0-28a5-4b20-948e-fd0d08781e0b",
        "packageType": "AIP",
        "packageContainerType": "zip",
        "packagePreservationEvent": {"preservationEventValue": "made", "preservationEventType": "packing"},
    }
    _valid(event)
    with pytest.raises(Untranslatable) as refused:
        _down(event)
    assert refused.value.code == ErrorCode.GENERR002


def test_what_is_invalid_in_its_own_version_is_refused_with_the_classifier_s_verdict() -> None:
    message = _create(17)
    message["messageBody"]["objectValue"] = 9
    with pytest.raises(Untranslatable, match="not a valid message") as refused:
        _up(message)
    assert refused.value.code == ErrorCode.GENERR001


def test_the_vocabularies_canonical_lists_are_the_differences_of_the_two_schema_sets() -> None:
    from rdss.model import canonical

    v3 = schemas.V3.documents()["model/enumerations.json"]["$defs"]
    v4 = schemas.V4.documents()["model/enumerations.json"]["$defs"]
    for name in {*canonical.ENUMERATION_OF_MEMBER.values(), "personRole", "organisationRole"}:
        if name == "preservationEventType":
            continue  # never translated: see canonical.REMOVED_IN_V4
        renamed = canonical.RENAMED_IN_V4.get(name, {})
        old = {renamed.get(n, n) for n in schemas.enumeration_names(name)}
        assert set(v4[name]["enum"]) - old == canonical.ADDED_IN_V4.get(name, frozenset()), name
        assert old - set(v4[name]["enum"]) == canonical.REMOVED_IN_V4.get(name, frozenset()), name
    assert set(v3) >= {"personRole", "organisationRole"}
    assert canonical.VERSIONS == schemas.VERSIONS  # what is translated is what is judged


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"{not json", ErrorCode.GENERR007),
        (b"[]", ErrorCode.GENERR004),
        (b'{"messageHeader": {}}', ErrorCode.GENERR004),
    ],
)
def test_what_is_not_a_message_is_refused_with_a_code(payload: bytes, code: ErrorCode) -> None:
    with pytest.raises(Untranslatable) as refused:
        translate(payload, "4.0.0", tenant_jisc_id=TENANT)
    assert refused.value.code == code


def test_a_part_of_a_sequence_is_refused_and_an_unknown_version_is_the_callers_mistake() -> None:
    from rdss.model.sequences import split

    part = split(Workload(14).large(30_000), limit=15_000)[0]
    with pytest.raises(Untranslatable, match="part of a sequence"):
        translate(_dumps(part), "4.0.0", tenant_jisc_id=TENANT)
    with pytest.raises(ValueError, match="no translator writes"):
        translate(_dumps(_create()), "5.0.0")


def test_the_published_4_0_0_examples_go_down_and_back_or_are_refused_for_their_type() -> None:
    from tests.support.published import examples_4

    for example in examples_4():
        payload = _dumps(example.message)
        if not example.valid:  # the update example, still 3.x-shaped: not a 4.0.0 message
            with pytest.raises(Untranslatable, match="not a valid message"):
                translate(payload, "3.0.2")
        elif example.message["messageHeader"]["messageType"] == "PreservationEvent":
            with pytest.raises(Untranslatable) as refused:
                translate(payload, "3.0.2")
            assert refused.value.code == ErrorCode.GENERR002
        else:
            down = orjson.loads(translate(payload, "3.0.2"))
            _valid(down)
            assert down["messageHeader"]["messageId"] == example.message["messageHeader"]["messageId"]
            assert object_uuid(down) == example.message["messageBody"]["objectUUID"], example.name
            _valid(_up(down))


def object_uuid(message: dict[str, Any]) -> Any:
    return message["messageBody"].get("objectUuid")


def test_every_valid_example_goes_up_and_back_or_is_refused_for_its_type() -> None:
    for path in valid_examples():
        message = orjson.loads(path.read_bytes())
        header = message["messageHeader"]
        if header["messageType"].startswith("Vocabulary") or header["messageSequence"]["total"] != 1:
            with pytest.raises(Untranslatable):
                _up(message)
            continue
        down = _down(_up(message))
        _valid(down)
        assert down["messageHeader"]["messageId"] == header["messageId"], path.name


def test_the_canonical_form_is_one_for_both_versions() -> None:
    message = _create(15)
    up = translate(_dumps(message), "4.0.0", tenant_jisc_id=TENANT)
    from_v3, from_v4 = read(_dumps(message)), read(up)
    assert from_v3.body == from_v4.body
    assert from_v3.header.message_id == from_v4.header.message_id


# -- the property -----------------------------------------------------------------------------------

_KINDS = [("MetadataCreate", "Event"), ("MetadataCreate", "Command"), ("MetadataUpdate", "Event")]
_KINDS += [("MetadataDelete", "Command"), ("MetadataRead", "Command"), ("MetadataRead", "Document")]
_CATCH_ALL = {"resourceType": ("equipment", "journal")}


def _enumerated(value: Any, parent: str | None = None) -> list[tuple[Any, Any, str]]:
    """(container, key, enumeration) of every enumerated value in a 3.0.2 body."""
    from rdss.model.canonical import enumeration_of

    found: list[tuple[Any, Any, str]] = []
    if isinstance(value, list):
        for item in value:
            found.extend(_enumerated(item, parent))
    elif isinstance(value, dict):
        for name, child in value.items():
            enumeration = enumeration_of(name, parent)
            if enumeration is not None and type(child) is int:
                found.append((value, name, enumeration))
            else:
                found.extend(_enumerated(child, name))
    return found


@st.composite
def valid_v3_messages(draw: st.DrawFn) -> dict[str, Any]:
    """Workload messages with every enumerated value drawn from its whole range (reserved codes
    too) and the optional members 4.0.0 lacks or reshapes."""
    workload = Workload(draw(st.integers(0, 2**32)))
    message = workload.message(*draw(st.sampled_from(_KINDS)))
    body = message["messageBody"]
    if "objectTitle" in body:
        if draw(st.booleans()):
            body["objectFile"] = [workload.file(i) for i in range(draw(st.integers(1, 2)))]
        if draw(st.booleans()):
            body["objectPreservationEvent"] = [{"preservationEventValue": "made", "preservationEventType": 3}]
        if draw(st.booleans()):
            body["objectRelatedIdentifier"] = [
                {"identifier": {"identifierValue": "https://example.org/x", "identifierType": 18}, "relationType": 1}
            ]
        for container, key, enumeration in _enumerated(body):
            container[key] = draw(st.integers(1, _ENUMERATIONS[enumeration]["maximum"]))
    header = message["messageHeader"]
    if draw(st.booleans()):
        header["messageTimings"]["expirationTimestamp"] = "2001-01-01T00:00:00Z"  # never judged
    if draw(st.booleans()):
        header["messageHistory"] = [
            {"machineId": "p", "machineAddress": "10.0.0.1", "timestamp": "2026-01-01T00:00:00Z"}
        ]
    return message


def _reserved_without_catch_all(body: Any) -> bool:
    return any(
        e == "personIdentifierType" and c[k] > len(schemas.enumeration_names(e)) for c, k, e in _enumerated(body)
    )


def _expected_back(body: dict[str, Any]) -> dict[str, Any]:
    """What a 3.0.2 body is after going to 4.0.0 and back: the documented losses applied."""
    expected = copy.deepcopy(body)
    expected.pop("objectPreservationEvent", None)
    creation = _code("preservationEventType", "creation")
    for file in expected.get("objectFile", ()):
        values = "; ".join(e["preservationEventValue"] for e in file["filePreservationEvent"])
        file["filePreservationEvent"] = [{"preservationEventType": creation, "preservationEventValue": values}]
    for container, key, enumeration in _enumerated(expected):
        names = schemas.enumeration_names(enumeration)
        name = names[container[key] - 1] if container[key] <= len(names) else None
        if enumeration == "resourceType" and name in _CATCH_ALL["resourceType"]:
            container[key] = _code("resourceType", "other")
        elif enumeration == "personRole" and name is None:
            container[key] = _code("personRole", "other")
    return expected


@settings(max_examples=150)
@given(valid_v3_messages())
def test_any_valid_3_0_2_message_goes_to_a_valid_4_0_0_one_and_back(message: dict[str, Any]) -> None:
    _valid(message)
    header, body = message["messageHeader"], message["messageBody"]
    if _reserved_without_catch_all(body):
        with pytest.raises(Untranslatable, match="reserves without a name"):
            _up(message)
        return
    up = _up(message)
    _valid(up)
    assert up["messageHeader"]["messageId"] == header["messageId"]
    assert up["messageHeader"].get("correlationId") == header.get("correlationId")
    assert up["messageBody"]["objectUUID"] == body["objectUuid"]
    assert up["messageHeader"]["messageHistory"][:-1] == header.get("messageHistory", [])
    down = _down(up)
    _valid(down)
    assert down["messageHeader"]["messageId"] == header["messageId"]
    assert down["messageBody"] == _expected_back(body)
    assert {k: v for k, v in down["messageHeader"].items() if k != "messageHistory"} == {
        k: v for k, v in header.items() if k != "messageHistory"
    }


# -- the command line and the benchmark ---------------------------------------------------------------


def test_rdss_translate_prints_the_message_or_refuses_it_in_one_line(tmp_path: Any, capsys: Any) -> None:
    from rdss.cli import main

    create, patch = tmp_path / "create.json", tmp_path / "patch.json"
    create.write_bytes(_dumps(_create(16)))
    patch.write_bytes(_dumps(Workload(16).message("VocabularyPatch", "Event")))
    assert main(["translate", "--to", "4.0.0", "--tenant-jisc-id", "9", str(create)]) == 0
    printed = orjson.loads(capsys.readouterr().out)
    assert printed["messageHeader"]["tenantJiscID"] == 9
    _valid(printed)
    assert main(["translate", "--to", "4.0.0", "--tenant-jisc-id", "9", str(patch)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "GENERR002 VocabularyPatch has no form in 4.0.0" in err
    assert main(["translate", "--to", "3.1.0", str(create)]) == 2


def test_the_translation_benchmark_times_both_ways_beside_the_classifier(capsys: Any) -> None:
    from rdss.cli import main

    assert main(["bench", "translate", "--messages", "40", "--rounds", "1", "--json"]) == 0
    figures = orjson.loads(capsys.readouterr().out)
    assert figures["messages"] == 40
    assert min(figures["up_per_s"], figures["down_per_s"], figures["classifier_per_s"]) > 0


# -- totality ---------------------------------------------------------------------------------------

_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 40) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


@settings(max_examples=300)
@given(st.data(), st.sampled_from(["3.0.2", "4.0.0"]))
def test_translating_anything_gives_a_message_or_untranslatable_never_another_error(data: Any, to: str) -> None:
    """A file given to rdss translate may hold anything: a mutated message of either version
    comes back translated or refused with a code, never with another exception."""
    message = copy.deepcopy(data.draw(st.sampled_from(_MUTABLE)))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(message) if p]
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent: Any = message
        for step in path[:-1]:
            parent = parent[step]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_ANY_JSON)
    try:
        out = translate(_dumps(message), to, tenant_jisc_id=TENANT)
    except Untranslatable as refused:
        code = refused.code
    else:
        code = None
        _valid(orjson.loads(out))  # what comes out is a valid message of the target
    assert code is None or code in set(ErrorCode)


_MUTABLE = [
    *(Workload(40 + i).message(t, c) for i, (t, c) in enumerate(_KINDS)),
    *(
        orjson.loads(translate(_dumps(Workload(50 + i).message(t, c)), "4.0.0", tenant_jisc_id=TENANT))
        for i, (t, c) in enumerate(_KINDS)
    ),
]


@st.composite
def valid_v4_messages(draw: st.DrawFn) -> dict[str, Any]:
    """4.0.0 messages as a 4.0.0 producer writes them: translated up from drawn 3.0.2 ones, then
    given what only 4.0.0 says - typed descriptions, optional members left out, names 3.0.2
    lacks, a Dataset's own members."""
    message = draw(valid_v3_messages())
    for container, key, enumeration in _enumerated(message["messageBody"]):
        if enumeration == "personIdentifierType" and container[key] > 2:
            container[key] = 1  # a code 3.0.2 reserves has no 4.0.0 form (tested above)
    message = _up(message)
    body = message["messageBody"]
    if "objectTitle" not in body:
        return message
    if draw(st.booleans()):
        body["objectDescription"].append({"descriptionValue": "How.", "descriptionType": "methods"})
    for member in ("objectValue", "objectKeyword"):
        if member in body and draw(st.booleans()):
            del body[member]
    if draw(st.booleans()):
        del body["objectOrganisationRole"][0]["organisation"]["organisationAddress"]
    if draw(st.booleans()):
        body["objectPersonRole"][0]["person"].pop("personOrganisationUnit")
    if draw(st.booleans()):
        body["objectDate"].append({"dateValue": "2020-01-01T00:00:00Z", "dateType": "awarded"})
    if draw(st.booleans()):
        body["objectIdentifier"].append({"identifierValue": body["objectUUID"], "identifierType": "UUID"})
    if draw(st.booleans()):
        body["objectResourceType"] = "informationPackage"
    if draw(st.booleans()) and "objectValue" in body:
        # a Dataset (which requires objectValue, and is of resource type dataset)
        body.update(language=["en"], version="1", objectResourceType="dataset")
    return message


@settings(max_examples=150)
@given(valid_v4_messages())
def test_any_valid_4_0_0_message_goes_to_a_valid_3_0_2_one_keeping_its_identity(message: dict[str, Any]) -> None:
    _valid(message)
    down = _down(message)
    _valid(down)
    header = message["messageHeader"]
    assert down["messageHeader"]["messageId"] == header["messageId"]
    assert down["messageHeader"].get("correlationId") == header.get("correlationId")
    assert down["messageBody"]["objectUuid"] == message["messageBody"]["objectUUID"]
    _valid(_up(down))
