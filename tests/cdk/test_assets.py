"""Lambda assets: the handler, the rdss package, the schemas and arm64 wheels, bundled without Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdss.topology import RDSS, Processor
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
    assert (root / "rdss" / "topology.py").is_file()
    # rdss.schemas finds schemas/ beside the package
    assert (root / "schemas" / "message" / "header.json").is_file()
    for package in ("orjson", "jsonschema_rs", "aws_lambda_powertools", "boto3", "aws_xray_sdk"):
        assert (root / package).is_dir(), package
    assert not list(root.glob("**/__pycache__"))


def test_native_code_is_built_for_lambda_arm64_only(dev: Synthesized) -> None:
    root = asset_dir(dev, "broker")
    extensions = [p.name for p in root.rglob("*.so")]
    assert any("aarch64" in name for name in extensions)  # orjson, built for arm64
    assert not [name for name in extensions if "x86_64" in name]
    # nothing of rdss itself is native: the classifier is orjson + jsonschema-rs, shipped as arm64 wheels
    assert not list((root / "rdss").rglob("*.so"))
