"""The optimizer of a native model, by name: `<library>:<name>` of its framework's library (the
adapter's `LIBRARY`: `torch:<Class>`, `optax:<name>`), or `lbfgs` (ours) on any, hyperparameters
by the library's own names. Another framework's optimizer is one line naming what fits."""

from __future__ import annotations

from convergence_study.errors import InputError
from datasets.user_file import absolute, imported, is_file_name, split
from study.train.frameworks import adapter, native_adapters, of_library
from study.train.models.workload import LBFGS_NAME, LbfgsSubmission, Submission

KERAS_LIBRARY = "keras"  # keras:<Class>, for Keras models (study/frameworks/keras/optimizers.py)


def allowed(framework: str) -> str:
    own = adapter(framework)
    return f"{own.LIBRARY}:{own.OPTIMIZER_FORM}, {LBFGS_NAME}"


def make_submission(optimizer: str, hyperparameters: dict, framework: str,
                    what: str = "the model") -> Submission:
    """The submission for `optimizer` on a model of `framework` (one with native models)."""
    natives = [a.NAME for a in native_adapters()]
    if framework not in natives:
        raise InputError(f"native models run on {', '.join(natives)}, not {framework!r}")
    if not isinstance(optimizer, str) or not optimizer:
        raise InputError(f"optimizer must be a name ({allowed(framework)}), got {optimizer!r}")
    if not isinstance(hyperparameters, dict):
        raise InputError(f"{optimizer}: hyperparameters must be a table, got "
                         f"{hyperparameters!r}")
    if optimizer == LBFGS_NAME:
        return LbfgsSubmission(hyperparameters)
    check_family(optimizer, framework, what)
    # a file's optimizer goes to its library's adapter whole (path.py:Name)
    name = optimizer if is_file_name(optimizer) else optimizer.partition(":")[2]
    own = adapter(framework)
    if not name:
        raise InputError(f"optimizer '{optimizer}': name the {own.LIBRARY} optimizer "
                         f"({allowed(framework)})")
    return own.submission(name, hyperparameters)


def check_family(optimizer: str, framework: str, what: str = "the model") -> None:
    """An optimizer of the model's own framework (or lbfgs); else one line naming what fits."""
    own = adapter(framework)
    prefix = library_of(optimizer)
    if optimizer == LBFGS_NAME or prefix == own.LIBRARY:
        return
    other = of_library(prefix)
    kind = ("a Keras optimizer (for Keras models)" if prefix == KERAS_LIBRARY else
            other.OPTIMIZER_KIND if other is not None else None)
    if kind is None:
        raise InputError(f"optimizer: unknown '{optimizer}'; {what} is {own.MODELS}: "
                         f"allowed {allowed(framework)}")
    raise InputError(f"optimizer '{optimizer}' is {kind}; {what} is {own.MODELS}: "
                     f"allowed {allowed(framework)}")


def library_of(optimizer: str) -> str:
    """keras, a native library (torch, optax), or ours (lbfgs): whose optimizer it is (before
    anything imports; a file's by its imports, "" where it cannot be read)."""
    if is_file_name(optimizer):
        try:
            return file_library(optimizer)
        except InputError:
            return ""
    return "ours" if optimizer == LBFGS_NAME else str(optimizer).partition(":")[0]


def file_library(optimizer: str) -> str:
    """The library of a file's optimizer (`path.py:Name`): the one library its file imports, read
    off the file before anything runs; one line where it imports none of them or several."""
    path, _ = split(optimizer)
    libraries = (*native_libraries(), KERAS_LIBRARY)
    found = imported(path) & set(libraries)
    if len(found) != 1:
        raise InputError(f"{path.resolve()}: the train study runs {file_kinds()} from a file "
                         f"that imports its one library ({', '.join(libraries)}); it imports "
                         f"{' and '.join(sorted(found)) or 'none of them'}")
    return found.pop()


def file_kinds() -> str:
    """What a file's optimizer may be: a native library's (its adapter's kind) or Keras's."""
    kinds = [*(a.OPTIMIZER_KIND for a in native_adapters()), "a Keras optimizer class"]
    return ", ".join(kinds[:-1]) + " or " + kinds[-1]


def native_libraries() -> tuple[str, ...]:
    """The prefixes of native optimizers (torch, optax), in the registry's order."""
    return tuple(a.LIBRARY for a in native_adapters())


def check_name(optimizer: str) -> None:
    """The name's form only (before any framework is imported): keras:<Class>, a native
    library's optimizer or lbfgs; which framework it fits is checked once the model is loaded."""
    if optimizer == LBFGS_NAME:
        return
    if is_file_name(optimizer):
        absolute(optimizer)  # the file exists
        file_library(optimizer)
        return
    prefix, sep, name = str(optimizer).partition(":")
    if not sep or not name or prefix not in (*native_libraries(), KERAS_LIBRARY):
        raise InputError(f"optimizer: unknown '{optimizer}'; allowed: {allowed_names()}")


def allowed_names() -> str:
    """Every form of an optimizer's name, as a message lists them."""
    forms = ", ".join(f"{a.LIBRARY}:{a.OPTIMIZER_FORM}" for a in native_adapters())
    return (f"{KERAS_LIBRARY}:<Class> (any Keras optimizer), {forms} (native models), "
            f"{LBFGS_NAME}, path/to/file.py:Name ({file_kinds()})")


def check_library_name(optimizer: str) -> None:
    """A native optimizer's name as its library knows it, where that is known before any
    framework starts (before a command draws its initial weights, which starts Keras)."""
    if is_file_name(optimizer):
        return
    own = of_library(library_of(optimizer))
    if own is not None:
        try:
            own.check_optimizer(str(optimizer).partition(":")[2])
        except InputError as exc:
            raise InputError(f"optimizer: {exc}") from None
