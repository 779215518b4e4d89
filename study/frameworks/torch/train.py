"""The train study on PyTorch: Keras models on Keras 3's torch backend (an eager step, as `fit`'s
is on torch), and native `torch.nn.Module`s with torch.optim's optimizers (`torch:<Class>`).

A native module's parameters are updated in place, as torch.optim does: a step is plain torch,
the loss returned detached (the loop reads it once per segment); `train()` mode while stepping,
`eval()` while evaluating. torch.optim.LBFGS gets the closure it needs.
"""

from __future__ import annotations

import numpy as np

from convergence_study.errors import InputError
from datasets.user_file import is_file_name, split
from optimizers.from_file import call
from optimizers.from_file import provenance as file_record
from study.frameworks.torch.backend import gpu_available
from study.frameworks.torch.optimizers import torch_arguments, torch_class
from study.sweep.schema import Column
from study.train.frameworks import Adapter
from study.train.models.input_rows import input_mismatch
from study.train.models.model import (
    LOG_PROBABILITIES,
    LOGIT_OUTPUTS,
    PROBABILITIES,
    array_ops,
    check_trainable,
)
from study.train.models.native_load import loaded
from study.train.models.workload import (
    Submission,
    Workload,
    describe,
    initial_arrays,
)
from study.train.run.flat import layout, pieces
from study.train.run.stepper import KerasStepper

# ---- Keras models on PyTorch --------------------------------------------------------------------

class TorchStepper(KerasStepper):
    INDEX = np.int64

    def __init__(self, model, loss, x, y, rows):
        import torch

        self.torch, self.device = torch, model.weights[0].value.device  # where Keras put them
        super().__init__(model, loss, x, y, rows)

    def put(self, values):
        return self.torch.as_tensor(values, device=self.device)

    def run(self, prepared):
        torch, model = self.torch, self.model
        for index in prepared:
            y_pred = model(self.x[index], training=True)
            model.zero_grad()
            total = self.loss(self.y[index], y_pred)
            if model.losses:
                total = total + torch.stack([torch.as_tensor(v) for v in model.losses]).sum()
            total.backward()
            weights = model.trainable_weights[:]
            with torch.no_grad():
                model.optimizer.apply([v.value.grad for v in weights], weights)
        return total.detach()

    def read(self, value) -> float:
        return float(value.item())


# ---- the flat objective (our L-BFGS) ----------------------------------------------------------

def flat_value_and_grad(weights, loss_at, data, device=None):
    import torch

    device = weights[0].device if device is None else device
    shapes, ends = layout(weights)
    data = tuple(torch.as_tensor(a, device=device) for a in data)

    def call(w):
        flat = torch.as_tensor(w, dtype=torch.float32, device=device)
        with torch.no_grad():
            for weight, value in zip(weights, pieces(flat, shapes, ends, torch.reshape),
                                     strict=True):
                weight.copy_(value)
        value = loss_at(weights, data)
        grads = torch.autograd.grad(value, weights)
        return float(value.detach()), torch.cat([g.reshape(-1) for g in grads]).double().cpu() \
            .numpy()

    return call


# ---- native PyTorch models --------------------------------------------------------------------

def torch_device(device: str):
    import torch

    if device == "gpu":
        if not torch.cuda.is_available():
            raise InputError("no GPU visible to PyTorch")
        return torch.device("cuda")
    return torch.device("cpu")


def torch_ops():
    import torch

    return array_ops(torch, lambda a: torch.log_softmax(a, -1), torch.nn.functional.logsigmoid,
                     lambda a, y: torch.gather(a, -1, y.reshape(-1, 1).long())[:, 0])


def expected_rows(module) -> tuple | None:
    """The rows a module takes, read off its first convolution (its input channels first, the
    other axes open) or linear layer (its input features); None where it starts otherwise."""
    import torch

    for layer in module.modules():
        if isinstance(layer, torch.nn.modules.conv._ConvNd):
            return (layer.in_channels, *"DHW"[3 - len(layer.kernel_size):])
        if isinstance(layer, torch.nn.Linear):
            return (layer.in_features,)
    return None


class TorchWorkload(Workload):
    framework = "torch"
    ARRAY = "a tensor"

    place = staticmethod(torch_device)
    ops = staticmethod(torch_ops)

    def take_parameters(self, native, initial, seed: int) -> list[str]:
        import torch

        self.torch = torch
        self.module = native.obj.to(self.device)
        named = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        check_trainable(sum(p.numel() for _, p in named), self.what)
        self.params = [p for _, p in named]
        if initial is not None:
            values = initial_arrays(initial, [n for n, _ in named],
                                    [tuple(p.shape) for p in self.params], self.what)
            self.initial = [torch.as_tensor(v, device=self.device) for v in values]
        else:
            self.initial = [p.detach().clone() for p in self.params]
        return [n for n, _ in named]

    def put(self, values, integers: bool = False):
        dtype = self.torch.int64 if integers else self.torch.float32
        return self.torch.as_tensor(np.asarray(values), dtype=dtype, device=self.device)

    def trial(self, function, *arguments):
        with self.torch.no_grad():
            return function(*arguments)

    def is_array(self, value) -> bool:
        return isinstance(value, self.torch.Tensor)

    def mismatch(self, exc: Exception) -> InputError:
        return input_mismatch(self.what, tuple(self.data[0].shape[1:]),
                              expected_rows(self.module), exc)

    def forward(self, params, x):
        return self.module(x)  # in train() mode (set by init_parameters and evaluation)

    def evaluation(self, params, rows: int | None = None) -> tuple[float, np.ndarray]:
        self.module.eval()
        try:
            with self.torch.no_grad():
                out = self.module(self.val[0][:rows])
                value = float(self.loss_fn(out, self.val[1][:rows]))
        finally:
            self.module.train()
        return value, out.detach().cpu().numpy()

    def probe(self, rows: int = 256):
        """The first validation rows, in eval() mode."""
        value, out = self.evaluation(self.init_parameters(), rows)
        return out, value

    def random_in_training(self) -> bool:
        """Two train() passes over the same rows, the global generator forked (the run draws
        what it would have drawn) and the module's buffers restored (batch statistics)."""
        torch = self.torch
        self.init_parameters()
        held = {k: v.detach().clone() for k, v in self.module.state_dict().items()}
        x = self.data[0][:64]
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices), torch.no_grad():
                first, second = self.module(x), self.module(x)
        finally:
            self.module.load_state_dict(held)
        return not torch.allclose(first, second, rtol=1e-5, atol=1e-6, equal_nan=True)

    def init_parameters(self):
        self.module.train()
        return self.assign(self.initial)

    def assign(self, values):
        with self.torch.no_grad():
            for parameter, value in zip(self.params, values, strict=True):
                parameter.copy_(value)
        return self.params

    def to_flat(self, params) -> np.ndarray:
        return self.torch.cat([p.detach().reshape(-1) for p in params]).double().cpu().numpy()

    def from_flat(self, w: np.ndarray):
        torch = self.torch
        flat = torch.as_tensor(np.asarray(w), dtype=torch.float32, device=self.device)
        return self.assign(pieces(flat, *layout(self.params), torch.reshape))

    def flat_value_and_grad(self):
        return flat_value_and_grad(self.params, lambda params, data: self.loss(params, data, None),
                                   self.data, self.device)

    def parameter_count(self) -> int:
        return int(sum(p.numel() for p in self.params))

    def placed(self) -> str:
        return str(self.params[0].device)


class TorchSubmission(Submission):
    """Any torch.optim optimizer by class name, or a file's torch.optim.Optimizer subclass
    (`path.py:Name`, stepped without a closure), its hyperparameters checked against the class's
    signature and the study's ranges before anything runs."""

    def __init__(self, class_name: str, hyperparameters: dict):
        import torch

        self.file = class_name if is_file_name(class_name) else None
        if self.file:
            self.cls = torch_class(self.file)
            if self.cls is None:
                raise InputError(f"{split(self.file)[0]}: {split(self.file)[1]} is not a "
                                 "torch.optim.Optimizer subclass")
            class_name = self.cls.__name__
        self.name = f"torch:{class_name}"
        base = torch.optim.Optimizer
        classes = sorted(n for n, v in vars(torch.optim).items()
                         if isinstance(v, type) and issubclass(v, base) and v is not base)
        if not self.file and class_name not in classes:
            raise InputError(f"unknown torch optimizer '{class_name}'; allowed: "
                             f"{', '.join(classes)}")
        if not self.file:
            self.cls = getattr(torch.optim, class_name)
        self.config = config = torch_arguments(self.name, self.cls, hyperparameters,
                                               {"maximize": False})  # the study minimises
        try:  # the library's own checks, before any data
            self.cls([torch.zeros(1, requires_grad=True)], **config)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{self.name}: {describe(exc)}") from None
        except Exception as exc:  # a file's class: its own code, in one line
            raise InputError(f"{self.file}: building it raised {type(exc).__name__}: "
                             f"{describe(exc)}") from None
        if self.file:
            self.first_step(torch)
        self.closure = class_name == "LBFGS" and not self.file

    def first_step(self, torch) -> None:
        """A file's class stepped once from zeros on a unit gradient: a failure is one line."""
        param = torch.zeros(4, requires_grad=True)
        optimizer = self.cls([param], **self.config)
        param.grad = torch.ones_like(param)
        call(self.file, "its first step", optimizer.step)
        if not bool(torch.isfinite(param).all()):
            raise InputError(f"{self.file}: the first step is not finite (a unit gradient from "
                             "zeros)")

    def init(self, workload, params):
        self.optimizer = self.cls(params, **self.config)
        return self.optimizer

    def warm(self, workload, state, index) -> None:
        """One step for what its first call costs (allocations, lazy initialisation), then the
        parameters and buffers, the optimizer's state and the random generators set back."""
        import copy

        torch = workload.torch
        held = [*workload.params, *workload.module.buffers()]
        saved = ([t.detach().clone() for t in held],
                 copy.deepcopy(state.state_dict()), torch.get_rng_state(),
                 torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None)
        self.update(workload, state, index)
        with torch.no_grad():
            for tensor, value in zip(held, saved[0], strict=True):
                tensor.copy_(value)
        state.load_state_dict(saved[1])
        state.zero_grad()
        torch.set_rng_state(saved[2])
        if saved[3] is not None:
            torch.cuda.set_rng_state_all(saved[3])

    def update(self, workload, state, index):
        seen = []

        def closure():
            state.zero_grad()
            value = workload.loss(workload.params, workload.data, index)
            value.backward()
            seen.append(value.detach())
            return value

        if self.closure:
            state.step(closure)
        else:
            closure()
            state.step()
        return state, seen[0]

    def parameters(self, workload, state):
        return workload.params

    def record(self) -> dict:
        import json

        import torch

        return {"optimizer_library": "torch", "torch_version": torch.__version__,
                **(file_record(self.file) if self.file else {}),
                "optimizer_config": json.dumps(self.optimizer.defaults, sort_keys=True,
                                               default=str)}


class TorchAdapter(Adapter):
    KERAS = True
    STYLE = (":", "^")
    LIBRARY = "torch"  # torch:<Class>
    OPTIMIZER_FORM = "<Class>"
    MODULES = "a torch.nn.Module"
    RATE = "lr"
    CODE_FILES = ("study/frameworks/torch/optimizers.py",)  # torch:<Class>'s ranges
    COLUMNS = (Column("torch_version", "str", "torch: optimizers: PyTorch's version"),)
    LINE_SEARCH = ("LBFGS",)  # its optimizers whose line search compares the loss at points
    # losses returned with a model whose meaning is known: (what the model must output, the family
    # of labels: sparse = class indices, binary = 0/1 floats); others are checked for shape
    KNOWN_LOSSES = {
        "torch.nn.functional.nll_loss": (LOG_PROBABILITIES, "sparse"),
        "torch.nn.modules.loss.NLLLoss": (LOG_PROBABILITIES, "sparse"),
        "torch.nn.functional.cross_entropy": (LOGIT_OUTPUTS, "sparse"),
        "torch.nn.modules.loss.CrossEntropyLoss": (LOGIT_OUTPUTS, "sparse"),
        "torch.nn.functional.binary_cross_entropy": (PROBABILITIES, "binary"),
        "torch.nn.modules.loss.BCELoss": (PROBABILITIES, "binary"),
        "torch.nn.functional.binary_cross_entropy_with_logits": (LOGIT_OUTPUTS, "binary"),
        "torch.nn.modules.loss.BCEWithLogitsLoss": (LOGIT_OUTPUTS, "binary"),
    }
    keras_stepper = TorchStepper
    workload = TorchWorkload
    submission = TorchSubmission
    flat_value_and_grad = staticmethod(flat_value_and_grad)
    gpu_seen = staticmethod(gpu_available)

    def module_kind(self, value) -> str | None:
        """A torch.nn.Module (recognised through the modules already imported)."""
        return "torch.nn.Module" if loaded(value, "torch.nn", "Module") else None

    def reseeded(self, seed: int, build):
        """A module drawn without a seed, drawn again after `torch.manual_seed(seed)` (its
        initializers use torch's global generator), so a seed gives the same instance."""
        import torch

        torch.manual_seed(seed)
        return build()

    def stochastic_layers(self, native) -> list[str]:
        """Dropout and batch normalization, by torch's own types."""
        import torch

        kinds = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
        return [type(m).__name__ for m in native.obj.modules()
                if isinstance(m, kinds) and getattr(m, "p", 1.0) > 0]


ADAPTER = TorchAdapter()
warm = ADAPTER.warm  # the warm process's preload (study.train.plugin.preload)
