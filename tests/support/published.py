"""The published 4.0.0 specification's examples, composed into whole messages.

Read from the directory :func:`rdss.bench.reference.default_location_4` finds (never copied
into the project); when it is nowhere to be found the test asking fails, it does not skip.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rdss.bench.reference import candidate_locations_4, default_location_4, reference_validator_4

#: Each example body (under messages/body/) with the example header of its type (under
#: messages/header/), and whether the 4.0.0 schemas accept the whole message. The update body
#: is still 3.x-shaped (objectUuid, integer enumerations, a string objectDescription): its
#: schema rejects it, as the spec's own tests never noticed (they update with the create bodies).
EXAMPLES_4: tuple[tuple[str, str, bool], ...] = (
    ("metadata_create_header", "metadata/create/research_object_create_request", True),
    ("metadata_create_header", "metadata/create/dataset_create_request", True),
    ("metadata_create_header", "metadata/create/article_create_request", True),
    ("metadata_create_header", "metadata/create/thesis_dissertation_create_request", True),
    ("metadata_create_error_header", "metadata/create/research_object_create_request", True),
    ("metadata_update_header", "metadata/update/research_object_update_request", False),
    ("metadata_delete_header", "metadata/delete/research_object_delete_request", True),
    ("metadata_read_request_header", "metadata/read/research_object_read_request", True),
    ("metadata_read_response_header", "metadata/read/research_object_read_response", True),
    ("preservation_event_header", "preservation/preservation_event_request", True),
)


@dataclass(frozen=True)
class Example:
    name: str
    message: dict[str, Any]
    valid: bool


@functools.cache
def location_4() -> Path:
    location = default_location_4()
    if location is None:
        searched = ", ".join(str(path) for path in candidate_locations_4()) or "nowhere"
        pytest.fail(
            f"the published RDSS 4.0.0 specification is not in any of: {searched}; "
            "set RDSS_REFERENCE_SCHEMAS_4 to the rdss-spec-4.0.0 directory",
            pytrace=False,
        )
    return location


@functools.cache
def reference_4() -> Callable[[bytes], bool]:
    return reference_validator_4(location_4())


def examples_4() -> list[Example]:
    """Every example body composed with its type's example header, and the published whole
    message (``messages/example_message.json``)."""
    messages = location_4() / "messages"
    found = [
        Example(
            f"{header} + {body}",
            {
                "messageHeader": json.loads((messages / "header" / f"{header}.json").read_text()),
                "messageBody": json.loads((messages / "body" / f"{body}.json").read_text()),
            },
            valid,
        )
        for header, body, valid in EXAMPLES_4
    ]
    found.append(Example("example_message", json.loads((messages / "example_message.json").read_text()), True))
    return found
