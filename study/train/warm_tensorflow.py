"""Keras on tensorflow in a warm process (study.train.warm)."""

from study.train.warm import prepare

prepare("tensorflow")
