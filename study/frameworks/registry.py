"""The tables every framework and backend is declared into (from its folder's __init__.py),
without importing any framework: studies, the bench, figures and tests read these and never name
a framework. A backend kept outside the project registers from a module, file or folder named in
CONVERGENCE_STUDY_BACKENDS, so that a run's own process, which inherits the environment, knows
it too.
"""

from __future__ import annotations

import glob
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from convergence_study.errors import InputError

DTYPES = ("float64", "float32")
FORMULATIONS = ("data", "gram")
DEVICES = ("cpu", "gpu")
NOUNS = {"feed": "feed mode"}  # how a message names an option
NVIDIA = "/dev/nvidia[0-9]*"  # the device files a CUDA GPU shows
PLUGINS = "CONVERGENCE_STUDY_BACKENDS"  # module names, .py files or folders, os.pathsep between


@dataclass(frozen=True)
class FeedMode:
    """One way the feed-mode study (study/feedmode) feeds its CNN on a framework."""

    api: str      # how the network is run: tf1 (graph + session), eager, function, jit, compile
    feed: str     # how the input reaches the ops
    model: str    # conv-pool (the original network) or fused-conv (one strided convolution)
    xla: bool     # compiled by XLA
    help: str
    # (other mode, 'time per call' or 'first-call time'): the pair the report compares
    against: tuple[str, str] | None = None
    framework: str = ""  # filled in when its framework is registered


PER_CALL, FIRST_CALL = "time per call", "first-call time"  # what a pair of modes compares


@dataclass(frozen=True)
class Framework:
    name: str
    module: str  # what `import` names
    title: str  # how a sentence names it
    packages: tuple[str, ...]  # distributions whose versions every row records
    extra: str | None  # `pip install 'convergence-study[EXTRA]'` installs it (None: always)
    preload: tuple[str, ...] = ()  # a warm process imports these (import only, no device)
    gpu_count: str = "print(0)"  # Python code printing how many GPUs the framework sees
    gpu_nodes: str = NVIDIA  # the device files its GPU needs ('': it never has one)
    feedmode: str | None = None  # the module building its feed-mode study modes
    feedmodes: dict = field(default_factory=dict)  # mode name -> FeedMode
    train: str | None = None  # the train study's adapter module for it (study.train.adapters)
    installs: tuple[str, ...] = ()  # distributions any of which installs it (default: the first)
    devices: tuple[str, ...] = DEVICES  # where it runs
    # its shipped native models for the train study: name -> "module:function"
    examples: dict = field(default_factory=dict)
    # a model library on the others' backends (Keras 3): its train-study module, which the
    # train study reaches it by (its `examples` are its shipped models)
    models: str | None = None

    def installed(self) -> bool:
        """Its distribution is installed (asked of the package metadata, not the import system,
        which would run import hooks such as study.tensorflow_logs' early)."""
        for name in self.installs or self.packages[:1]:
            try:
                importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            return True
        return False

    def require(self) -> None:
        """One line naming the extra when the framework is not installed."""
        if not self.installed():
            how = (f"pip install 'convergence-study[{self.extra}]'" if self.extra else
                   f"pip install {self.packages[0]}")
            raise InputError(f"the {self.name} backend needs {self.title}, which is not "
                             f"installed: {how}")

    def gpu_nodes_present(self) -> bool:
        """A check made before the framework (and CUDA's start-up logs) is imported; the
        framework itself is asked later (`gpu_count`)."""
        return gpu_nodes_present(self.gpu_nodes)

    def no_gpu(self) -> str:
        """How a GPU asked for and absent is reported (the run is never moved to the CPU)."""
        return f"no GPU visible to {self.title}"

    def trainable(self) -> Framework:
        """The framework, when the train study can run on it (its entry names an adapter):
        one line if not."""
        if self.train is None:
            allowed = ", ".join(name for name, f in FRAMEWORKS.items() if f.train)
            raise InputError(f"the train study runs Keras models, and Keras has no {self.title} "
                             f"backend; allowed: {allowed}")
        return self


@dataclass(frozen=True)
class Backend:
    name: str
    framework: str | None  # a key of FRAMEWORKS; None: the NumPy stack, always present
    module: str
    cls: str
    options: dict = field(default_factory=dict)  # option -> allowed values (first: default)
    files: tuple[str, ...] = ()  # source files a run's code fingerprint covers
    labels: dict = field(default_factory=dict)  # feed mode -> how the engine reads
    # (option, value) -> (option, value, why) it needs: refused before anything runs
    needs: dict = field(default_factory=dict)
    ops: str = ""  # the class providing ArrayOps in `module` ('': the backend class itself)
    # engine label -> (line style, marker) in the figures, in the order figures list engines
    styles: dict = field(default_factory=dict)
    # the bench's module of hand-written twins on it (loops our harness is divided by, its copy
    # probe: study/bench/twins); None: the bench says it has none
    twin: str | None = None

    def allowed(self, option: str) -> tuple:
        return self.options.get(option, ())

    def default(self, option: str):
        values = self.options.get(option)
        return values[0] if values else None

    def check(self, options: dict) -> None:
        """Option names and values against the declaration: one line naming the bad one."""
        for key, value in options.items():
            if key not in self.options:
                raise InputError(f"backend '{self.name}' has no option '{key}'; allowed: "
                                 f"{', '.join(self.options)}")
            allowed = self.options[key]
            if isinstance(allowed[0], bool) and not isinstance(value, bool):
                raise InputError(f"{self.name}: {key} must be true or false, got {value!r}")
            if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
                raise InputError(f"unknown {NOUNS.get(key, key)} {value!r} for {self.name}; "
                                 f"allowed: {', '.join(map(str, allowed))}")
        for (key, value), (other, required, why) in self.needs.items():
            given = options.get(other, self.default(other))
            if options.get(key) == value and given != required:
                raise InputError(f"{self.name}: {NOUNS.get(key, key)} {value!r} needs {other} "
                                 f"{required!r} ({why}), not {given!r}")

    def label(self, options: dict) -> str:
        """The engine as figures and tables name it (without device and dtype)."""
        feed = options.get("feed") or self.default("feed")
        engine = self.labels.get(feed, f"{self.name}-{feed}" if feed else self.name)
        if options.get("xla") is True:
            engine += "+xla"
        if options.get("formulation") == "gram":
            engine += "+gram"
        return engine

    def engines(self) -> list[str]:
        """Its engine labels (feed modes, XLA, gram), those with a declared style first."""
        feeds = self.allowed("feed") or (None,)
        plain = [self.label({"feed": f}) for f in feeds]
        made = [*plain, *(self.label({"feed": f, "xla": True}) for f in feeds
                          if True in self.allowed("xla")),
                *(f"{e}+gram" for e in plain if "gram" in self.allowed("formulation"))]
        return list(dict.fromkeys([*self.styles, *made]))

    def load(self, attribute: str = ""):
        """The backend's class (or another of its module's names), its framework checked first
        (one line naming the extra)."""
        if self.framework is not None:
            FRAMEWORKS[self.framework].require()
        return getattr(importlib.import_module(self.module), attribute or self.cls)

    def load_ops(self):
        """The class providing its ArrayOps (made with a dtype)."""
        return self.load(self.ops)


FRAMEWORKS: dict[str, Framework] = {}
BACKENDS: dict[str, Backend] = {}


def register(declared: Backend | None, on: Framework | None = None) -> None:
    """Add a backend (and the framework it runs on, if new): a name taken by another entry,
    or a framework that is not declared, is one line."""
    if on is not None:
        if on.name in FRAMEWORKS and FRAMEWORKS[on.name] != on:
            raise InputError(f"framework '{on.name}' is registered twice")
        taken = {m for f in FRAMEWORKS.values() if f.name != on.name for m in f.feedmodes}
        if taken & set(on.feedmodes):
            raise InputError(f"framework '{on.name}': feed mode(s) "
                             f"{', '.join(sorted(taken & set(on.feedmodes)))} already declared")
        FRAMEWORKS[on.name] = replace(on, feedmodes={
            name: replace(mode, framework=on.name) for name, mode in on.feedmodes.items()})
    if declared is None:
        return
    if declared.framework is not None:
        framework(declared.framework)
    if declared.name in BACKENDS and BACKENDS[declared.name] != declared:
        raise InputError(f"backend '{declared.name}' is registered twice")
    BACKENDS[declared.name] = declared


def gpu_nodes_present(pattern: str = NVIDIA) -> bool:
    """Whether device files matching `pattern` are there, and not hidden by
    CUDA_VISIBLE_DEVICES ('' or -1)."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1")
    return bool(pattern) and not hidden and bool(glob.glob(pattern))


def backend(name: str) -> Backend:
    found = BACKENDS.get(name)
    if found is None:
        raise InputError(f"unknown backend '{name}'; allowed: {', '.join(BACKENDS)}")
    return found


def framework(name: str) -> Framework:
    """The named framework; an unknown name is one line listing the known ones."""
    found = FRAMEWORKS.get(name)
    if found is None:
        raise InputError(f"unknown framework '{name}'; allowed: {', '.join(FRAMEWORKS)}")
    return found


def framework_of(name: str) -> Framework | None:
    """The framework a backend runs on (None for the NumPy stack)."""
    key = backend(name).framework
    return None if key is None else framework(key)


def option_names() -> tuple[str, ...]:
    """Every backend option but the dtype, in declaration order (the command line's flags)."""
    return tuple(dict.fromkeys(o for b in BACKENDS.values() for o in b.options if o != "dtype"))


def feed_modes() -> dict[str, FeedMode]:
    """Every framework's feed-mode study modes, in declaration order."""
    return {name: mode for f in FRAMEWORKS.values() for name, mode in f.feedmodes.items()}


def make_backend(name: str, dtype: str = "float64", **options):
    """The named backend, its options checked against the declaration before its framework is
    imported; a framework that is not installed is one line naming the extra."""
    declared = backend(name)
    declared.check({"dtype": dtype, **options})
    return declared.load()(dtype=dtype, **options)


def load_plugins(value: str | None = None) -> None:
    """Register the backends of the modules, .py files or package folders named in
    CONVERGENCE_STUDY_BACKENDS, each declaring BACKEND and, when it brings one, FRAMEWORK."""
    value = os.environ.get(PLUGINS, "") if value is None else value
    for item in filter(None, value.split(os.pathsep)):
        module = _import_plugin(item)
        if not hasattr(module, "BACKEND"):
            raise InputError(f"{PLUGINS}: '{item}' declares no BACKEND")
        register(module.BACKEND, getattr(module, "FRAMEWORK", None))


def _import_plugin(item: str):
    """A module by name; a .py file or a package folder by path, imported under its own name
    (the file's stem, the folder's name) so that the modules its declaration names import."""
    path = Path(item)
    if item.endswith(".py"):
        if not path.is_file():
            raise InputError(f"{PLUGINS}: no file '{item}'")
        name, source, package = path.stem, path, None
    elif path.is_dir() or os.sep in item or "/" in item:
        if not path.is_dir():
            raise InputError(f"{PLUGINS}: no folder '{item}'")
        source = path / "__init__.py"
        if not source.is_file():
            raise InputError(f"{PLUGINS}: folder '{item}' has no __init__.py (a framework's "
                             "folder is a package declaring BACKEND and FRAMEWORK)")
        name, package = path.resolve().name, [str(path.resolve())]
    else:
        try:
            return importlib.import_module(item)
        except ImportError as exc:
            raise InputError(f"{PLUGINS}: cannot import '{item}': {exc}") from None
    if name in sys.modules:  # imported already under its name (a test's own import)
        found = getattr(sys.modules[name], "__file__", None)
        if found is None or Path(found).resolve() != source.resolve():
            raise InputError(f"{PLUGINS}: '{item}' would be imported as '{name}', the name of "
                             f"another module ({found or 'built in'}); rename it")
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, source,
                                                  submodule_search_locations=package)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so that the backend's `module` imports it by name
    try:
        spec.loader.exec_module(module)
    except (ImportError, SyntaxError) as exc:
        del sys.modules[name]
        raise InputError(f"{PLUGINS}: cannot import '{item}': {exc}") from None
    return module


def _load_plugins_or_exit() -> None:
    """At import, a bad CONVERGENCE_STUDY_BACKENDS ends the process in one line, exit 2: every
    table read from here on would be missing what it names."""
    try:
        load_plugins()
    except InputError as exc:
        print(f"convergence-study: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
