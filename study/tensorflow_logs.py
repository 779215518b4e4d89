"""TensorFlow's start-up lines kept off a command's terminal (`--verbose` shows them).

TensorFlow's C++ libraries write about seven lines to file descriptor 2 as they load and first
look at the devices, before TensorFlow reads TF_CPP_MIN_LOG_LEVEL (tensorflow/tensorflow#100442).
So the first `import tensorflow` of a command runs with descriptor 2 pointed at a temporary file
that is then dropped, and looks at the devices while it is there.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import tempfile

from study import interrupts


def hold_back() -> None:
    """Catch the first import of TensorFlow from now on (nothing if it is already imported)."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, _Finder)
                                                   for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


@contextlib.contextmanager
def descriptor_2_dropped():
    """Whatever C libraries write to stderr in this block is dropped (Python's own stderr
    writes too: flushed before, lost inside)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the real finders locate it
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):  # the real loader's other methods (resources, file name)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # a signal inside TensorFlow's C++ start-up (not all of it in extension modules' own
        # initialisation) aborted the process: held to the end of the import and the first look
        with interrupts.held(), descriptor_2_dropped():
            self.loader.exec_module(module)
            module.config.list_physical_devices()  # the first look logs cuInit's failure
