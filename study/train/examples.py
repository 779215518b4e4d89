"""The shipped examples, which need no download: the original question's layer on the 8x8 digit
images scikit-learn ships, and a small MLP on the eve stand-in's late_week label.

Each model function takes (input_shape, outputs) and returns an uncompiled Keras model, as a
user's `file.py:function` does. Each data function returns (x, y) as float32 / integer arrays;
the split into training and validation rows is the study's (study.train.data).
"""

from __future__ import annotations

import numpy as np


def digits_cnn(input_shape, outputs):
    """conv 3x3x1x6 VALID -> avg_pool 2x2 -> relu (the original question's layer), then a dense
    softmax head."""
    import keras

    return keras.Sequential([
        keras.Input(shape=tuple(input_shape)),
        keras.layers.Conv2D(6, 3, padding="valid"),
        keras.layers.AveragePooling2D(2),
        keras.layers.Activation("relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(outputs, activation="softmax"),
    ], name="digits_cnn")


def eve_mlp(input_shape, outputs):
    """Two hidden layers of 32 relu units and a sigmoid output."""
    import keras

    return keras.Sequential([
        keras.Input(shape=tuple(input_shape)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(outputs, activation="sigmoid"),
    ], name="eve_mlp")


def digits(**_) -> tuple[np.ndarray, np.ndarray]:
    """1797 images of 8x8 pixels (0..16, scaled to [0, 1]) with their digit 0..9."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[..., None]
    return x, bunch.target.astype(np.int64)


def eve_late_week(rows: int = 20000, seed: int = 0, **_) -> tuple[np.ndarray, np.ndarray]:
    """The eve stand-in's four counts, log1p-scaled, and late_week = hour_of_week >= 84 as 0/1
    (datasets.eve's binary label)."""
    from datasets.eve import FEATURES, LABEL, eve_frame

    frame = eve_frame(rows, seed)
    x = np.log1p(frame[list(FEATURES)].to_numpy(np.float64)).astype(np.float32)
    return x, (frame[LABEL].to_numpy() >= 84).astype(np.int64)


MODELS = {"digits-cnn": digits_cnn, "eve-mlp": eve_mlp}
DATA = {"digits": digits, "eve-late-week": eve_late_week}
DATA_PARAMS = {"digits": (), "eve-late-week": ("rows", "seed")}
