"""RabbitMQ names (rdss.gateway.amqp.naming): a queue name over AMQP's 255 bytes is a mistake
named in one line, whatever part made it long."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.gateway.amqp.naming import MAX_NAME_BYTES, Names
from rdss.gateway.exceptions import UnusableName
from rdss.model import schemas


@given(
    namespace=st.text(alphabet="abcxyz-", max_size=64),
    group=st.text(alphabet="gé€", min_size=1, max_size=255),
    message_type=st.sampled_from(sorted(schemas.SPOKEN_TYPES)),
)
def test_a_queue_name_is_within_amqp_s_limit_or_refused(namespace: str, group: str, message_type: str) -> None:
    names = Names(namespace)
    expected = (f"{namespace}." if namespace else "") + f"{group}.metadata.{message_type}"
    if len(expected.encode()) <= MAX_NAME_BYTES:
        assert names.queue(group, "metadata", message_type) == expected
    else:
        with pytest.raises(UnusableName, match="AMQP allows 255"):
            names.queue(group, "metadata", message_type)
