"""Files the commands read beside the code: the example messages and the Glue jobs.

A wheel carries them as package data (``rdss/_examples``, ``rdss/_glue_jobs``; setup.py puts them
there, as it puts ``schemas/`` in ``rdss/_schemas``), found through :mod:`importlib.resources`, so
``rdss tour``, ``rdss local demo`` and the benchmarks run from an installed package wherever it is
run from. Only a package without them, a checkout's (editable install, ``python -m rdss``), reads
the source tree's own (``examples/messages/``, ``glue_jobs/``).

The Glue jobs also need their Java half, ``lib/rdss-glue.jar``, compiled against the Spark the
``glue`` extra installs. ``make setup`` builds it in a checkout; an installed package compiles it
on first use (``javac``, from a JDK: Spark needs Java anyway) into a copy of the jobs under the
state directory, one per version of the jobs and of pyspark.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from rdss import __version__
from rdss.host.statedir import state_directory

_PACKAGE = Path(str(importlib.resources.files("rdss")))
#: The source tree, when this package is a checkout's (editable install, ``python -m rdss``).
_CHECKOUT = _PACKAGE.parent
#: What the analytics need that a plain install lacks, said once for every command that runs a job.
GLUE_NEEDS = (
    "the Glue jobs need the glue extra and a Java 17 JDK (Spark runs on Java; javac builds the jobs' jar): "
    "pip install 'rdss-messaging[glue]' and install a JDK (e.g. apt-get install openjdk-17-jdk-headless)"
)
#: A fixed date for the jar's entries: the same classes give the same jar.
_JAR_DATE = (2000, 1, 1, 0, 0, 0)


class GlueUnavailable(RuntimeError):
    """The Glue jobs cannot run here; the message says what is missing and how to get it."""


def cdk_app_checkout() -> Path | None:
    """The checkout this package runs from, when the CDK app (``stacks/``, ``app.py``) is beside
    it: an editable install's ``rdss`` command finds it as ``python -m rdss`` in the checkout does."""
    if (_CHECKOUT / "stacks" / "__init__.py").is_file() and (_CHECKOUT / "app.py").is_file():
        return _CHECKOUT
    return None


def checkout_on_path() -> Path | None:
    """Put the checkout this package runs from (:func:`cdk_app_checkout`) on ``sys.path``, so that
    what lives beside the package there (``stacks/``, ``tests/support/``) imports from an editable
    install's ``rdss`` command as from ``python -m rdss`` in the checkout; None from a wheel."""
    checkout = cdk_app_checkout()
    if checkout is not None and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    return checkout


def examples_dir() -> Path:
    """The example messages: ``valid/`` and ``invalid/`` (named after the code each must get)."""
    for candidate in (_PACKAGE / "_examples", _CHECKOUT / "examples" / "messages"):
        if (candidate / "valid").is_dir():
            return candidate
    raise FileNotFoundError(f"the example messages are not beside {_PACKAGE}: reinstall rdss-messaging")


def glue_jobs_source() -> Path:
    """The Glue job scripts (``audit_compaction.py``, ``audit_report.py``, ``schema.py``, ``runtime.py``)
    and their Java sources, as shipped: the package's, else (a checkout) the source tree's."""
    for candidate in (_PACKAGE / "_glue_jobs", _CHECKOUT / "glue_jobs"):
        if (candidate / "audit_compaction.py").is_file():
            return candidate
    raise FileNotFoundError(f"the Glue jobs are not beside {_PACKAGE}: reinstall rdss-messaging")


def glue_jobs_dir() -> Path:
    """The Glue jobs, ready to run locally (``python DIR/audit_compaction.py --input ...``): the
    package's copy with its jar built on first use, else (a checkout) ``glue_jobs/`` with its jar
    from ``make setup``.

    Raises:
        GlueUnavailable: pyspark is not installed, or no ``javac`` to build the jar with.
    """
    source = glue_jobs_source()
    try:
        import pyspark
    except ImportError:
        raise GlueUnavailable(f"pyspark is not installed: {GLUE_NEEDS}") from None
    if source.parent == _CHECKOUT:
        return source  # a checkout: make setup builds the jar (the job says so if it is missing)
    spark_jars = Path(pyspark.__file__).resolve().parent / "jars"
    digest = hashlib.sha256(f"{__version__} {pyspark.__version__}".encode())
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    target = state_directory() / "glue-jobs" / digest.hexdigest()[:16]
    if (target / "lib" / "rdss-glue.jar").is_file():
        return target
    return _materialise(source, target, spark_jars)


def _materialise(source: Path, target: Path, spark_jars: Path) -> Path:
    """Copy the scripts to ``target`` and compile ``lib/rdss-glue.jar`` there, in a scratch
    directory renamed into place whole (two processes doing it at once both end with a good copy)."""
    javac = _javac()
    if javac is None:
        raise GlueUnavailable(f"javac not found: {GLUE_NEEDS}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as scratch:
        build = Path(scratch) / "jobs"
        shutil.copytree(source, build, ignore=shutil.ignore_patterns("__pycache__", "lib"))
        classes = Path(scratch) / "classes"
        sources = sorted(str(p) for p in (build / "java").rglob("*.java"))
        compiled = subprocess.run(
            [javac, "-nowarn", "--release", "11", "-d", str(classes), "-cp", f"{spark_jars}/*", *sources],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            raise GlueUnavailable(f"javac could not build the Glue jobs' jar: {compiled.stderr.strip()[-1000:]}")
        (build / "lib").mkdir()
        with zipfile.ZipFile(build / "lib" / "rdss-glue.jar", "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr(_entry("META-INF/MANIFEST.MF"), "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.writestr(_entry(path.relative_to(classes).as_posix()), path.read_bytes())
        try:
            build.rename(target)
        except OSError:  # another process put its copy there first
            if not (target / "lib" / "rdss-glue.jar").is_file():
                raise
    return target


def _javac() -> str | None:
    """``javac`` on the PATH, else in ``$JAVA_HOME/bin``."""
    home = os.environ.get("JAVA_HOME")
    return shutil.which("javac") or (shutil.which("javac", path=str(Path(home) / "bin")) if home else None)


def _entry(name: str) -> zipfile.ZipInfo:
    entry = zipfile.ZipInfo(name, _JAR_DATE)
    entry.compress_type = zipfile.ZIP_DEFLATED
    return entry


#: Chart.js, as npm installs it (package.json): a wheel carries the file (setup.py copies it).
CHART_JS = "chart.umd.min.js"


def chart_js() -> Path:
    """Chart.js's one-file build, which the console serves and the analytics report inlines: the
    wheel's copy (``rdss/_vendor``), else (a checkout) ``node_modules``' (``make node``)."""
    for candidate in (_PACKAGE / "_vendor" / CHART_JS, _CHECKOUT / "node_modules" / "chart.js" / "dist" / CHART_JS):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"Chart.js is not beside {_PACKAGE}: reinstall rdss-messaging (or make node in a checkout)")
