"""Fault injection around real boto3 clients: the calls still reach the emulator unless a
fault is due, so what does get through is real."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError


class Proxy:
    """Forwards every method to ``client``; ``faults[method]`` may intercept a call first."""

    def __init__(self, client: Any, **faults: Callable[..., Any]) -> None:
        self._client = client
        self._faults = faults
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            fault = self._faults.get(name)
            if fault is not None:
                return fault(target, *args, **kwargs)
            return target(*args, **kwargs)

        return call


def client_error(code: str, operation: str, **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"injected {code}"}, **extra}, operation)


def partial_put_records(fail: Callable[[int, dict[str, Any]], bool]) -> Callable[..., Any]:
    """put_records where entries for which ``fail(call_number, entry)`` holds are reported as
    throttled (ProvisionedThroughputExceededException) and the rest really put."""
    state = {"call": 0}

    def fault(put_records: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
        state["call"] += 1
        entries = kwargs["Records"]
        failing = [fail(state["call"], e) for e in entries]  # decided once per entry
        passing = [e for e, failed in zip(entries, failing, strict=True) if not failed]
        real = put_records(**{**kwargs, "Records": passing})["Records"] if passing else []
        results, it = [], iter(real)
        for failed in failing:
            if failed:
                results.append(
                    {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded for shard"}
                )
            else:
                results.append(next(it))
        return {"FailedRecordCount": len(entries) - len(passing), "Records": results}

    return fault
