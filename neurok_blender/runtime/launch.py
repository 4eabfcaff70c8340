"""Starts the worker from an installed extension, whatever the add-on's package is called. No bpy use.

An extension lives at ``.../extensions/<repo>/neurok`` and is imported by Blender as
``bl_ext.<repo>.neurok``; a plain interpreter cannot import that name. This launcher maps the
extension folder to the package name ``neurok_blender`` without running its ``__init__``, then
runs the entry module (the worker unless told otherwise). Usage:
``python launch.py [--entry MODULE] -- [worker arguments]``.
"""

import os
import runpy
import sys
import types

DEFAULT_ENTRY = "neurok_blender.runtime.worker"
MIN_PYTHON = (3, 10)
EXIT_WRONG_PYTHON = 3  # the add-on turns this exit code into RuntimeUnavailable


def check_python() -> None:
    """Refuse, with a plain message on stderr, an interpreter too old for the runtime (checked before
    anything else is imported, so the message comes out even where our modules would not compile)."""
    if tuple(sys.version_info[:2]) < MIN_PYTHON:
        # plain concatenation: this line must run (and say why) even on interpreters without f-strings
        found = str(sys.version_info[0]) + "." + str(sys.version_info[1])
        needed = str(MIN_PYTHON[0]) + "." + str(MIN_PYTHON[1])
        sys.stderr.write("NeuROK's runtime needs Python " + needed + " or newer, but " + sys.executable
                         + " is Python " + found + "; point the NeuROK preferences at a newer Python or use "
                         "Install Runtime\n")
        sys.stderr.flush()
        sys.exit(EXIT_WRONG_PYTHON)


def _bootstrap() -> None:
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "neurok_blender" not in sys.modules:
        package = types.ModuleType("neurok_blender")
        package.__path__ = [package_dir]
        package.__file__ = os.path.join(package_dir, "__init__.py")
        sys.modules["neurok_blender"] = package


def main() -> None:
    check_python()
    argv = sys.argv[1:]
    entry = DEFAULT_ENTRY
    if len(argv) >= 2 and argv[0] == "--entry":
        entry, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    sys.argv = [entry, *argv]
    _bootstrap()
    runpy.run_module(entry, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
