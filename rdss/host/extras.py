"""The optional extras of the package (``pyproject.toml``), by the top-level modules they
install: what lets a command that needs one the user did not install say which, in one line."""

from __future__ import annotations

DISTRIBUTION = "rdss-messaging"

EXTRAS = {
    "moto": "local",
    "flask": "local",
    "flask_cors": "local",
    "werkzeug": "local",
    "jinja2": "console",
    "pika": "amqp",
    "aws_xray_sdk": "tracing",
    "aws_cdk": "cdk",
    "constructs": "cdk",
    "cdk_nag": "cdk",
    "pyspark": "glue",
    "pyarrow": "glue",
}


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """``needs the local extra (moto is not installed): pip install 'rdss-messaging[local]'``,
    or None when the missing module is no extra's."""
    package = (error.name or "").partition(".")[0]
    extra = EXTRAS.get(package)
    if extra is None:
        return None
    return f"needs the {extra} extra ({package} is not installed): pip install '{DISTRIBUTION}[{extra}]'"
