"""PyTorch's shipped native models (study.train.models.examples says what they are):
the digits CNN and the eve MLP in Keras's parameter layout, and PyTorch's MNIST example Net as
written upstream."""

from __future__ import annotations

from study.train.models.examples import _cnn_shapes, _glorot_limit, _mlp_shapes


def digits_cnn_torch(input_shape, outputs, seed: int = 0):
    """digits-cnn in PyTorch (NHWC input, as the data and Keras have it)."""
    import torch
    import torch.nn.functional as F

    class DigitsCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            generator = torch.Generator().manual_seed(seed)
            shapes = _cnn_shapes(input_shape, outputs)
            self.conv_kernel, self.conv_bias, self.dense_kernel, self.dense_bias = (
                torch.nn.Parameter(_torch_init(torch, shape, generator)) for shape in shapes)

        def forward(self, x):
            h = F.conv2d(x.permute(0, 3, 1, 2), self.conv_kernel.permute(3, 2, 0, 1),
                         self.conv_bias)
            h = torch.relu(F.avg_pool2d(h, 2))
            h = h.permute(0, 2, 3, 1).flatten(1)  # Keras's Flatten order: (h, w, c)
            return torch.softmax(h @ self.dense_kernel + self.dense_bias, -1)

    return DigitsCNN()


def eve_mlp_torch(input_shape, outputs, seed: int = 0):
    """eve-mlp in PyTorch: 32-32 relu units and a sigmoid."""
    import torch

    class EveMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            generator = torch.Generator().manual_seed(seed)
            self.weights = torch.nn.ParameterList(
                torch.nn.Parameter(_torch_init(torch, shape, generator))
                for shape in _mlp_shapes(input_shape, outputs))

        def forward(self, x):
            w = self.weights
            h = torch.relu(x @ w[0] + w[1])
            h = torch.relu(h @ w[2] + w[3])
            return torch.sigmoid(h @ w[4] + w[5])

    return EveMLP()


def _torch_init(torch, shape, generator):
    if len(shape) == 1:
        return torch.zeros(shape)
    limit = _glorot_limit(shape)
    return (torch.rand(shape, generator=generator) * 2 - 1) * limit


def mnist_net_torch(input_shape, outputs):
    """PyTorch's MNIST example `Net` (github.com/pytorch/examples, mnist/main.py) as written
    there: channels-first rows, log_softmax outputs (the loss: nll), trained there with Adadelta
    at lr 1.0, batch 64. A run starts from its Keras twin's draw for the seed (mnist-net)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, outputs)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    return Net()
