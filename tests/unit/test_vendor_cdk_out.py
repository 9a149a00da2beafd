"""``rdss vendor config NAME --cdk-out DIR`` reads files the user did not write by hand: whatever
they hold - too deep, not UTF-8, not JSON, not a regular file, too large - one line naming the
file, exit 2; and a vendor that is not there is answered with the names it would take."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest

from rdss.cli import main, vendor
from rdss.deployment.vendors import output_key
from rdss.host.inputs import InputTooLarge, NotARegularFile, read_regular_file

STACK = "rdss-dev"
VENDORS = ("acme", "acme-archive")


def template(vendors: tuple[str, ...] = VENDORS) -> dict:
    resources, outputs = {}, {}
    for name in vendors:
        role = output_key(name, "Role")
        resources[role] = {"Type": "AWS::IAM::Role", "Properties": {"RoleName": f"rdss-dev-vendor-{name}"}}
        values = {
            "RoleArn": {"Fn::GetAtt": [role, "Arn"]},
            "ExternalId": "abc",
            "Region": {"Ref": "AWS::Region"},
            "Group": name,
            "Writes": "input",
            "Reads": "",
            "InputStreamName": "rdss-dev-input",
        }
        outputs.update({output_key(name, what): {"Value": value} for what, value in values.items()})
    return {"Resources": resources, "Outputs": outputs}


@pytest.fixture
def cdk_out(tmp_path: Path) -> Path:
    (tmp_path / f"{STACK}.template.json").write_bytes(orjson.dumps(template()))
    manifest = {"artifacts": {STACK: {"environment": "aws://123456789012/eu-west-2"}}}
    (tmp_path / "manifest.json").write_bytes(orjson.dumps(manifest))
    return tmp_path


def config(capsys: pytest.CaptureFixture[str], cdk_out: Path, name: str = "acme") -> tuple[int, str, str]:
    code = main(["vendor", "config", name, "--url", "kinesis://dev", "--cdk-out", str(cdk_out)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_synthesised_template_configures_its_vendor(capsys, cdk_out):
    code, out, err = config(capsys, cdk_out)
    assert (code, err) == (0, "")
    assert "role=arn:aws:iam::123456789012:role/rdss-dev-vendor-acme" in out


def test_a_vendor_not_there_is_answered_with_the_names_vendor_config_takes(capsys, cdk_out):
    """The names were the output keys' CamelCase stems (Acme, AcmeArchive), which it refuses."""
    code, out, err = config(capsys, cdk_out, "nosuch")
    assert (code, out) == (2, "")
    assert err == f"rdss vendor: {STACK} has no vendor 'nosuch' (its vendors: acme, acme-archive)\n"
    for name in ("acme", "acme-archive"):  # each as listed is taken
        assert config(capsys, cdk_out, name)[0] == 0


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"[" * 1_500 + b"]" * 1_500, "not JSON: depth limit exceeded"),
        (b'{"Outputs": "\xff\xfe"}', "not JSON: str is not valid UTF-8"),
        (b'{"Outputs": ', "not JSON: "),
        (b"[]", "not a JSON object"),
        (b'{"Outputs": {"X": 7}}', "not a template rdss synthesised"),
        (b'{"Resources": [], "Outputs": {"X": {"Value": {"Ref": "Nope"}}}}', "not a template rdss synthesised"),
    ],
)
@pytest.mark.parametrize("which", [f"{STACK}.template.json", "manifest.json"])
def test_a_file_of_cdk_out_that_is_not_what_synth_writes_is_one_line_naming_it(capsys, cdk_out, which, data, said):
    path = cdk_out / which
    path.write_bytes(data)
    code, out, err = config(capsys, cdk_out)
    if which == "manifest.json" and said.startswith("not a template"):
        assert (code, out) == (2, "")  # a manifest of another shape: no account, or not one
        assert err.count("\n") == 1
        return
    assert (code, out) == (2, "")
    assert err.startswith("rdss vendor: ")
    assert err.count("\n") == 1
    assert str(path) in err
    assert said in err


def test_a_fifo_a_device_and_a_directory_are_refused_unread(capsys, cdk_out):
    """A FIFO hung the command; a link to /dev/zero was read until memory ran out."""
    path = cdk_out / f"{STACK}.template.json"
    path.unlink()
    os.mkfifo(path)
    hung = threading.Timer(10, lambda: open(path, "wb").close())  # never needed: the open does not block
    hung.start()
    try:
        code, out, err = config(capsys, cdk_out)
    finally:
        hung.cancel()
    assert (code, out, err) == (
        2,
        "",
        f"rdss vendor: cannot read {path}: not a regular file\n",
    )
    path.unlink()
    path.symlink_to("/dev/zero")
    assert config(capsys, cdk_out)[2] == f"rdss vendor: cannot read {path}: not a regular file\n"
    path.unlink()
    path.mkdir()
    assert "not a regular file" in config(capsys, cdk_out)[2]


def test_a_file_over_the_limit_is_refused_having_read_one_byte_past_it(tmp_path, capsys, cdk_out, monkeypatch):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 1_001)
    with pytest.raises(InputTooLarge):
        read_regular_file(big, 1_000)
    assert read_regular_file(big, 1_001) == b" " * 1_001
    with pytest.raises(NotARegularFile):
        read_regular_file(Path("/dev/zero"), 1_000)  # a device: refused before a byte is read
    monkeypatch.setattr(vendor, "MAX_CDK_FILE_BYTES", 1_000)
    (cdk_out / "manifest.json").write_bytes(b" " * 1_001)
    code, out, err = config(capsys, cdk_out)
    assert (code, out) == (2, "")
    assert err == f"rdss vendor: {cdk_out / 'manifest.json'}: larger than 0 MiB, so not a CDK file of rdss\n"
