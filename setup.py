"""The build step pyproject.toml cannot express: the files the package carries from outside rdss/."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: source tree -> where an installed package finds it (rdss.model.schemas, rdss.host.resources)
PACKAGE_DATA = {
    "schemas": "_schemas",
    # the example messages: rdss tour, rdss local demo's workload
    "examples/messages": "_examples",
    # the Glue jobs and their Java sources (the jar is built on first use against the installed
    # pyspark: rdss.host.resources), for rdss local demo, rdss analytics and rdss bench glue
    "glue_jobs": "_glue_jobs",
}


#: single files -> where in the package: Chart.js (npm, package.json), for rdss console and the
#: analytics report (rdss.host.resources.chart_js), and its licence beside it
PACKAGE_FILES = {
    "node_modules/chart.js/dist/chart.umd.min.js": "_vendor/chart.umd.min.js",
    "node_modules/chart.js/LICENSE.md": "_vendor/chart.js.LICENSE.md",
}


class BuildWithData(build_py):
    """Copies PACKAGE_DATA into the package so an installed wheel carries it (an editable
    install reads the source tree itself), and cdk.json (rdss/_cdk.json) so `rdss bench cost
    --env ENV` prices the environments it defines."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for source, target in PACKAGE_DATA.items():
            shutil.copytree(
                source,
                Path(self.build_lib, "rdss", target),
                dirs_exist_ok=True,
                # build products: the jar and the class-data-sharing archive of make setup
                ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]", "lib"),
            )
        shutil.copyfile("cdk.json", Path(self.build_lib, "rdss", "_cdk.json"))
        for source, target in PACKAGE_FILES.items():
            if not Path(source).is_file():
                raise SystemExit(f"{source} is missing: run make node (npm ci) before building the package")
            Path(self.build_lib, "rdss", target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, Path(self.build_lib, "rdss", target))


setup(cmdclass={"build_py": BuildWithData})
