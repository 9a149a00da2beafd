"""Build steps pyproject.toml cannot express: the C fast path and the packaged schemas."""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class BuildWithSchemas(build_py):
    """Copies schemas/ into the package (rdss/_schemas) so an installed wheel carries them."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            shutil.copytree("schemas", Path(self.build_lib, "rdss", "_schemas"), dirs_exist_ok=True)


setup(
    ext_modules=[
        # optional: without a compiler the classifier runs on jsonschema-rs alone, just slower
        Extension("rdss._fastcheck", ["rdss/_fastcheck.c"], optional=True, extra_compile_args=["-O2", "-std=c11"]),
    ],
    cmdclass={"build_py": BuildWithSchemas},
)
