"""One of each mechanism: the jittered backoff beside the spec's fixed one, and the one rule for
an incomplete sequence that waited too long (the sweep's and a gateway receiver's)."""

from __future__ import annotations

import pytest

from rdss.model.errors import ErrorCode, SendFailed
from rdss.model.retry import PATIENT, SPEC_BACKOFF, Backoff
from rdss.model.sequences import SEQUENCE_TIMEOUT_SECONDS, stale


def test_jitter_spreads_each_delay_over_its_upper_half_and_the_spec_s_delays_stay_fixed():
    jittered = Backoff(base=0.1, cap=30.0, jitter=True)
    for retry in (1, 3, 8, 20):
        plain = Backoff(base=0.1, cap=30.0).delay(retry)
        samples = {jittered.delay(retry) for _ in range(200)}
        assert all(plain / 2 <= d <= plain for d in samples)
        assert len(samples) > 1
    assert list(SPEC_BACKOFF.delays()) == list(SPEC_BACKOFF.delays())  # no jitter where the spec sets them
    assert PATIENT.jitter
    assert PATIENT.delay(10**6) <= 30.0  # a long outage: capped, and the exponent does not overflow


def test_a_sequence_past_its_expiry_is_generr003_and_one_past_the_timeout_generr006():
    assert stale("s", 1, 3, expires_at=None, waited=10, now=1000) is None
    code, why = stale("s", 1, 3, expires_at=999.0, waited=10, now=1000)  # type: ignore[misc]
    assert code is ErrorCode.GENERR003
    assert why == "sequence s expired before it was complete (1 of 3 parts arrived)"
    code, why = stale("s", 2, 3, expires_at=None, waited=SEQUENCE_TIMEOUT_SECONDS, now=1000)  # type: ignore[misc]
    assert code is ErrorCode.GENERR006
    assert why == "sequence s incomplete after 3600 s (2 of 3 parts arrived)"
    assert stale("s", 2, 3, expires_at=2000.0, waited=59, now=1000, timeout=60) is None


def test_one_send_failed_for_the_gateway_and_the_amgi_servers():
    from rdss.amgi import SendFailed as AmgiSendFailed
    from rdss.gateway import SendFailed as GatewaySendFailed

    assert AmgiSendFailed is GatewaySendFailed is SendFailed
    failure = SendFailed("GENERR006: 1 message(s) not sent", ["m"], error_code=ErrorCode.GENERR006, sent=["r"])
    assert isinstance(failure, OSError)
    assert (failure.failed, failure.undelivered, failure.sent, failure.error_code) == (["m"], ["m"], ["r"], "GENERR006")
    with pytest.raises(OSError, match="not sent"):
        raise failure
