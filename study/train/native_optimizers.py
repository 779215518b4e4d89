"""The optimizer of a native model, by name: `torch:<Class>` (any torch.optim optimizer) on a
PyTorch module, `optax:<name>` (any optax alias) on a JAX model, `lbfgs` (ours, full batch, on
the flattened parameters) on either; hyperparameters by the library's own names. An optimizer
of another framework (a Keras one included: those run on Keras models) is one line naming what
the model accepts."""

from __future__ import annotations

from datasets.errors import InputError
from study.train.workload import LBFGS_NAME, LbfgsSubmission, Submission

PREFIXES = {"torch": "torch:", "jax": "optax:"}
TITLES = {"torch": "a PyTorch model", "jax": "a JAX model"}


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
    from study.train.native_jax import OptaxSubmission  # framework == "jax" (checked above)

    return OptaxSubmission(name, hyperparameters)


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
