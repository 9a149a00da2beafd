"""Content-based routing answers for every message the classifier lets through, in every version
it speaks (issue 31): a valid message the route lookup does not know would be retried and then
land on ``error`` as GENERR009."""

from __future__ import annotations

import pytest

from rdss.deployment.routing import Router
from rdss.deployment.topology import RDSS, Deployment, from_environment
from rdss.model import schemas

PAIRS = sorted({(t, c) for spoken in schemas.SETS for t in spoken.message_types for c in spoken.classes_for(t)})


@pytest.mark.parametrize(("message_type", "message_class"), PAIRS)
def test_every_valid_type_and_class_of_every_version_has_a_route(message_type: str, message_class: str) -> None:
    route = RDSS.route(message_type, message_class)
    assert route is not None
    assert RDSS.channel(route.channel).kind == "routed"
    destination = Router(from_environment(Deployment("dev", RDSS, "rdss").environment_variables())).destination(
        message_type, message_class
    )
    assert destination.channel == route.channel


def test_a_preservation_event_travels_on_the_metadata_channel() -> None:
    for message_class in schemas.V4.classes_for("PreservationEvent"):
        route = RDSS.route("PreservationEvent", message_class)
        assert route is not None
        assert (route.channel, route.reply) == ("metadata", False)


def test_the_routes_name_no_type_no_version_speaks() -> None:
    spoken = {t for s in schemas.SETS for t in s.message_types}
    assert {r.message_type for r in RDSS.routes} == spoken
