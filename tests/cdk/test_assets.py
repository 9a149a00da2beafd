"""Lambda assets: the handler, the rdss package, the schemas and arm64 wheels, bundled without Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdss.deployment.topology import RDSS, Processor
from stacks import lambda_python
from tests.cdk.conftest import Synthesized


def asset_dir(synthesized: Synthesized, processor: str) -> Path:
    function = synthesized.stack.messaging.processors[processor].function
    code = synthesized.json["Resources"][synthesized.logical_id(function)]["Properties"]["Code"]
    asset_hash = code["S3Key"].removesuffix(".zip")
    path = synthesized.outdir / f"asset.{asset_hash}"
    assert path.is_dir(), path
    return path


@pytest.mark.parametrize("processor", RDSS.processors, ids=lambda p: p.name)
def test_asset_holds_handler_package_schemas_and_dependencies(dev: Synthesized, processor: Processor) -> None:
    root = asset_dir(dev, processor.name)
    source = Path(__file__).resolve().parents[2] / "lambdas" / processor.name / "handler.py"
    assert (root / "handler.py").read_bytes() == source.read_bytes()
    assert (root / "rdss" / "__init__.py").is_file()
    assert (root / "rdss" / "deployment" / "topology.py").is_file()
    # rdss.model.schemas finds schemas/ beside the package
    assert (root / "schemas" / "message" / "header.json").is_file()
    for package in ("orjson", "jsonschema_rs", "aws_lambda_powertools", "aws_xray_sdk"):
        assert (root / package).is_dir(), package


@pytest.mark.parametrize("processor", RDSS.processors, ids=lambda p: p.name)
def test_asset_leaves_the_runtime_s_sdk_out_and_stays_small(dev: Synthesized, processor: Processor) -> None:
    root = asset_dir(dev, processor.name)
    # what Lambda's Python runtime provides is not shipped again (stacks.bundling.RUNTIME_PROVIDED)
    for module in ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six.py", "urllib3"):
        assert not (root / module).exists(), module
    # Powertools only as far as the handler's code imports it: no idempotency, parser, batch...
    powertools = root / "aws_lambda_powertools"
    assert (powertools / "logging" / "logger.py").is_file()
    for unused in ("idempotency", "parser", "batch", "parameters", "feature_flags"):
        assert not (powertools / "utilities" / unused).exists(), unused
    assert lambda_python.zipped_size(root) <= 8_000_000


@pytest.mark.parametrize("processor", RDSS.processors, ids=lambda p: p.name)
def test_every_module_ships_compiled_for_python_3_12_unchecked(dev: Synthesized, processor: Processor) -> None:
    root = asset_dir(dev, processor.name)
    sources = [p for p in root.rglob("*.py") if "-stubs" not in p.parts[-2]]
    assert sources
    magic = (3531).to_bytes(2, "little") + b"\r\n"  # Python 3.12's byte code
    for source in sources:
        compiled = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        assert compiled.is_file(), source.relative_to(root)
        header = compiled.read_bytes()[:16]
        # PEP 552: flags 0b01 = hash-based, source not checked (the task root is read-only)
        assert int.from_bytes(header[4:8], "little") == 0b01, source.relative_to(root)
        assert header[:4] == magic, source.relative_to(root)


def test_native_code_is_built_for_lambda_arm64_only(dev: Synthesized) -> None:
    root = asset_dir(dev, "broker")
    extensions = [p.name for p in root.rglob("*.so")]
    assert any("aarch64" in name for name in extensions)  # orjson, built for arm64
    assert not [name for name in extensions if "x86_64" in name]
    # nothing of rdss itself is native: the classifier is orjson + jsonschema-rs, shipped as arm64 wheels
    assert not list((root / "rdss").rglob("*.so"))
