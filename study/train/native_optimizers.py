"""The optimizer of a native model, by name: `torch:<Class>` (any torch.optim optimizer) on a
PyTorch module, `optax:<name>` (one of optax's optimizers, not its building blocks) on a JAX
model, `lbfgs` (ours, full batch, on the flattened parameters) on either; hyperparameters by
the library's own names. An optimizer of another framework (a Keras one included: those run on
Keras models) is one line naming what the model accepts."""

from __future__ import annotations

import importlib.util
import inspect

from datasets.errors import InputError
from study.train.workload import LBFGS_NAME, LbfgsSubmission, Submission

PREFIXES = {"torch": "torch:", "jax": "optax:"}
TITLES = {"torch": "a PyTorch model", "jax": "a JAX model"}
OPTAX_ALIAS_MODULE = "optax._src.alias"  # where optax defines its optimizers (its docs' list)


def allowed(framework: str) -> str:
    return f"{PREFIXES[framework]}<{'Class' if framework == 'torch' else 'name'}>, {LBFGS_NAME}"


def make_submission(optimizer: str, hyperparameters: dict, framework: str,
                    what: str = "the model") -> Submission:
    """The submission for `optimizer` on a model of `framework` (torch or jax)."""
    if framework not in PREFIXES:
        raise InputError(f"native models run on {', '.join(PREFIXES)}, not {framework!r}")
    if not isinstance(optimizer, str) or not optimizer:
        raise InputError(f"optimizer must be a name ({allowed(framework)}), got {optimizer!r}")
    if not isinstance(hyperparameters, dict):
        raise InputError(f"{optimizer}: hyperparameters must be a table, got "
                         f"{hyperparameters!r}")
    if optimizer == LBFGS_NAME:
        return LbfgsSubmission(hyperparameters)
    check_family(optimizer, framework, what)
    prefix, _, name = optimizer.partition(":")
    own = PREFIXES[framework].rstrip(":")
    if not name:
        raise InputError(f"optimizer '{optimizer}': name the {own} optimizer "
                         f"({allowed(framework)})")
    if framework == "torch":
        from study.train.native_torch import TorchSubmission

        return TorchSubmission(name, hyperparameters)
    check_optax_alias(name)
    from study.train.native_jax import OptaxSubmission  # framework == "jax" (checked above)

    return OptaxSubmission(name, hyperparameters)


def optax_aliases() -> tuple[str, ...]:
    """optax's optimizers, as optax itself lists them: the functions of its alias module (adam,
    sgd, lbfgs, ...), by the names optax exports. Not every function that returns a
    GradientTransformation: identity, scale or scale_by_adam are building blocks whose updates
    are not a descent step (optax adds updates, so scale(0.1) climbs the loss)."""
    import optax

    return tuple(sorted(name for name in dir(optax) if not name.startswith("_")
                        and inspect.isfunction(getattr(optax, name))
                        and getattr(optax, name).__module__ == OPTAX_ALIAS_MODULE))


def check_optax_alias(name: str) -> None:
    """`optax:<name>` names one of optax's optimizers; else one line naming it and the list."""
    import optax

    aliases = optax_aliases()
    if name in aliases:
        return
    why = (f"unknown optax optimizer '{name}'" if not hasattr(optax, name) else
           f"optax:{name} is not one of optax's optimizers (a building block: its updates are "
           "not a descent step by themselves)")
    raise InputError(f"{why}; optax's optimizers: {', '.join(aliases)}")


def check_family(optimizer: str, framework: str, what: str = "the model") -> None:
    """An optimizer of the model's own framework (or lbfgs); else one line naming what fits."""
    prefix = str(optimizer).partition(":")[0]
    if optimizer == LBFGS_NAME or prefix == PREFIXES[framework].rstrip(":"):
        return
    kind = {"keras": "a Keras optimizer (for Keras models)", "torch": "a PyTorch optimizer",
            "optax": "an optax (JAX) optimizer"}.get(prefix)
    if kind is None:
        raise InputError(f"optimizer: unknown '{optimizer}'; {what} is {TITLES[framework]}: "
                         f"allowed {allowed(framework)}")
    raise InputError(f"optimizer '{optimizer}' is {kind}; {what} is {TITLES[framework]}: "
                     f"allowed {allowed(framework)}")


def library_of(optimizer: str) -> str:
    """keras, torch, optax, or ours (lbfgs): whose optimizer it is (before anything imports)."""
    return "ours" if optimizer == LBFGS_NAME else str(optimizer).partition(":")[0]


def check_name(optimizer: str) -> None:
    """The name's form only (before any framework is imported): torch:<Class>, optax:<name>
    or lbfgs; which framework it fits is checked once the model is loaded."""
    if optimizer == LBFGS_NAME:
        return
    prefix, sep, name = str(optimizer).partition(":")
    if not sep or not name or prefix not in ("torch", "optax", "keras"):
        raise InputError(f"optimizer: unknown '{optimizer}'; allowed: keras:<Class>, "
                         f"torch:<Class>, optax:<name>, {LBFGS_NAME}")


def check_library_name(optimizer: str) -> None:
    """An optax optimizer's name against optax's list, where optax is installed (the list is
    optax's own): before a command draws its initial weights, which starts Keras."""
    if library_of(optimizer) == "optax" and importlib.util.find_spec("optax") is not None:
        try:
            check_optax_alias(str(optimizer).partition(":")[2])
        except InputError as exc:
            raise InputError(f"optimizer: {exc}") from None
