"""A benchmark's JSON holds what it measured, then every figure derived from that."""

from __future__ import annotations

from rdss.bench import idle, send


def test_derived_figures_follow_the_measured_ones_in_the_order_the_class_defines_them() -> None:
    figures = send.Figures(100, 3600.0, 2, 4.0, "emulator", {"PutRecords": 2, "ListShards": 1})
    assert figures.as_dict() == {
        "messages": 100,
        "mean_bytes": 3600.0,
        "shards": 2,
        "seconds": 4.0,
        "aws": "emulator",
        "calls": {"PutRecords": 2, "ListShards": 1},
        "messages_per_second": 25.0,
        "put_records_calls": 2,
        "put_records_per_1000": 20.0,
        "calls_per_1000": 30.0,
    }
    assert list(figures.as_dict())[-4:] == [
        "messages_per_second",
        "put_records_calls",
        "put_records_per_1000",
        "calls_per_1000",
    ]


def test_a_benchmark_may_add_to_its_figures() -> None:
    said = idle.Figures(seconds=10.0, cpu_seconds=0.1, settle_seconds=1.0).as_dict()
    assert said == {
        "seconds": 10.0,
        "cpu_seconds": 0.1,
        "settle_seconds": 1.0,
        "percent_of_one_core": 1.0,
        "target_percent": idle.TARGET_PERCENT,
    }
