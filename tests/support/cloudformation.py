"""Deploying a synthesised stack with CloudFormation itself, the way ``cdk deploy`` does after a
``cdk bootstrap``: the assets go to the bootstrap bucket, the bootstrap version to SSM, the
template (over CloudFormation's 51,200-byte inline limit) to S3, then CreateStack.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

#: The CDK's default bootstrap qualifier, and a bootstrap version the templates accept.
QUALIFIER = "hnb659fds"
BOOTSTRAP_VERSION = "30"


def _zipped(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory).as_posix())
    return buffer.getvalue()


def bootstrap(s3: Any, ssm: Any, account: str, region: str) -> str:
    """What ``cdk bootstrap`` leaves that a deployment reads: the assets bucket, the version."""
    bucket = f"cdk-{QUALIFIER}-assets-{account}-{region}"
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
    ssm.put_parameter(
        Name=f"/cdk-bootstrap/{QUALIFIER}/version", Value=BOOTSTRAP_VERSION, Type="String", Overwrite=True
    )
    return bucket


def unbootstrap(s3: Any, ssm: Any, bucket: str) -> None:
    """Undo :func:`bootstrap` once the test's stack is gone: on a shared endpoint nothing of a
    test stays (``cdk bootstrap``'s own bucket is kept, but it is no test's)."""
    from rdss.local.emulator import empty_bucket

    empty_bucket(s3, bucket, delete=True)
    with contextlib.suppress(ssm.exceptions.ParameterNotFound):
        ssm.delete_parameter(Name=f"/cdk-bootstrap/{QUALIFIER}/version")


def publish_assets(s3: Any, outdir: Path, stack: str, account: str, region: str) -> str:
    """Upload every file asset of ``stack`` (zipping directories); returns the template's key."""
    manifest = json.loads((outdir / f"{stack}.assets.json").read_text())
    template_key = ""
    for asset in manifest["files"].values():
        source = outdir / asset["source"]["path"]
        body = _zipped(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
        for destination in asset["destinations"].values():
            bucket = destination["bucketName"].replace("${AWS::AccountId}", account).replace("${AWS::Region}", region)
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)
            if source.name == f"{stack}.template.json":
                template_key = destination["objectKey"]
    if not template_key:
        raise ValueError(f"{stack}.assets.json lists no template")
    return template_key


def wait(cloudformation: Any, stack: str, wanted: str, timeout: float = 900) -> dict[str, Any]:
    """Until ``stack`` reaches ``wanted``; a failure state raises with the failed resources."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            [description] = cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except cloudformation.exceptions.ClientError as error:
            if wanted == "DELETE_COMPLETE" and "does not exist" in str(error):
                return {"StackStatus": "DELETE_COMPLETE"}
            raise
        status = description["StackStatus"]
        if status == wanted:
            return dict(description)
        if status.endswith(("_FAILED", "ROLLBACK_COMPLETE")) or time.monotonic() > deadline:
            events = cloudformation.describe_stack_events(StackName=stack)["StackEvents"]
            failed = [
                f"{e['LogicalResourceId']} ({e['ResourceType']}): {e.get('ResourceStatusReason', '')}"
                for e in events
                if e["ResourceStatus"].endswith("FAILED")
            ]
            raise AssertionError(f"{stack} is {status}, not {wanted}: {failed[:10]}")
        time.sleep(3)
