"""The train study's tables: one row per run and one row per evaluation (its trace). A
framework's own columns (its optimizer library's version) are declared in its adapter
(`COLUMNS`, study/frameworks/<name>/train.py) and joined here."""

from __future__ import annotations

from study.sweep.schema import ENGINE, VARYING, Column, Schema, side_table
from study.sweep.tuning import tuning_columns
from study.train.frameworks import native_adapters

TUNING = tuning_columns("how the grid's rate was chosen (the best validation value)")

RUN_COLUMNS = Schema("runs", (
    # the spec's axes
    Column("model", "str", "a shipped model's name (a Keras example, or its native twin: the "
                           "example's name and the framework's), a .keras file or "
                           "file.py:function"),
    Column("initial", "str", "a native model's .npz of initial parameters (None: a native "
                             "example starts from its Keras twin's weights for the seed, a "
                             "user's native model from its own initialization under the seed)"),
    Column("problem", "str", "the [[problems]] block's name (None: one run of `study train`, or "
                             "a row from before it was recorded)"),
    Column("data", "str", "a shipped data set's name or the user's file"),
    Column("data_params", "str", "the data table as JSON (its layout, one_hot, rows... "
                                 "where given: layout = channels_first moved the image arrays' "
                                 "channel axis after the rows)"),
    Column("loss", "str", "the loss that ran: by name (a Keras loss, NAME:from_logits, nll, "
                          "categorical_nll), or the qualified name of a callable returned with "
                          "a native model (its module and name)"),
    Column("metric", "str", "the Keras metric evaluated beside the loss"),
    Column("optimizer", "str", "keras:<Class>, a native model's library's <library>:<name> (its "
                               "framework's adapter names the library) or lbfgs (ours, on the "
                               "flat weights, full batch)"),
    Column("hyperparameters", "str", "as JSON (also as hp_* columns)"),
    Column("backend", "str", "the framework the model ran on (Keras's backend for a Keras "
                             "model): a registry framework with a train adapter"),
    Column("device", "str", "the device asked for: cpu or gpu (device_name: where it ran)"),
    Column("batch_size", "int", "rows per step; 0: full batch"),
    Column("eval_every", "int", "steps between evaluations; 0: once per epoch"),
    Column("target_metric", "str", "val_loss or val_<metric>"),
    Column("target_mode", "str", "min or max: which way the metric improves"),
    Column("target_how", "str", "given (in the config), round (set by the target-setting round), "
                                "setting (a run of that round), tuning (a tuning run: no target)"),
    Column("seed", "int", "seed of the initial weights and of the shuffling order"),
    Column("loop", "str", "steps (our timed loop) or fit (model.fit over the same steps)"),
    Column("stopping", "str", "the budget as JSON (also as stop_* columns)"),
    *TUNING,
    # the target
    Column("target_value", "float", "the target (None for runs without one)"),
    Column("target_margin", "float", "round: the relative margin the best value was relaxed by"),
    Column("target_seed", "int", "round: the held-apart seed its runs used"),
    # the record
    Column("n_train", "int", "training rows"),
    Column("n_val", "int", "validation rows"),
    Column("parameters", "int", "trainable and other weights of the model"),
    Column("batch_rows", "int", "rows per step as run"),
    Column("steps_per_epoch", "int", "steps per pass over the training rows (remainder dropped)"),
    Column("steps", "int", "steps taken (the first one included)"),
    Column("epochs", "float", "steps over steps per epoch"),
    Column("setup_seconds", "float", "setup apart from training: the step traced and compiled "
                                     "(or run once and undone), the state unmoved"),
    Column("seconds", "float", "training time over every step, to where the run stopped"),
    Column("total_seconds", "float", "setup + seconds"),
    Column("seconds_per_step", "float", "seconds over steps (loop 'fit': over the timed fit's)"),
    Column("seconds_to_target", "float", "training time to the first evaluation at or past the "
                                         "target (None when not reached), setup excluded"),
    Column("seconds_to_target_with_setup", "float", "the same plus setup_seconds (AlgoPerf's "
                                                    "count: compilation in)"),
    Column("steps_to_target", "int", "steps to that evaluation"),
    Column("eval_seconds", "float", "time spent evaluating, apart and never counted"),
    Column("evaluations", "int", "evaluations, the initial one included"),
    Column("segments", "int", "segments of steps run between two host reads"),
    Column("best_value", "float", "the best value of the target metric over the evaluations"),
    Column("train_loss", "float", "training loss of the last step"),
    Column("val_loss", "float", "validation loss at the last evaluation"),
    Column("val_metric", "float", "the validation metric at the last evaluation"),
    Column("initial_val_loss", "float", "validation loss of the loaded initial weights"),
    Column("reference_val_loss", "float", "the same from Keras's NumPy backend (agrees to 1e-4); "
                                          "a native example: its Keras twin's (None for other "
                                          "native models)"),
    Column("device_name", "str", "where the model's weights lay after the run, in the "
                                 "framework's words (cpu:0, cuda:0, GPU:0...), checked against "
                                 "device"),
    Column("jit_compile", "bool", "Keras compiled the train step (XLA) on this framework"),
    Column("keras_class", "str", "the Keras optimizer's class"),
    Column("keras_config", "str", "its get_config()"),
    Column("default_learning_rate", "float", "the learning rate Keras chose where the spec gave "
                                             "none (its class's default); None where given"),
    Column("keras_version", "str", "Keras version"),
    Column("loss_evaluations", "int", "lbfgs: loss-and-gradient evaluations (line search)"),
    Column("model_kind", "str", "keras, or what a native model is, as its framework's adapter "
                                "recognised it (study.train.models.native_load)"),
    Column("optimizer_library", "str", "whose optimizer: keras, a native library (its "
                                       "framework's adapter's LIBRARY) or ours (lbfgs)"),
    Column("optimizer_config", "str", "a native library's optimizer's settings as JSON"),
    Column("optimizer_file", "str", "path.py:Name, an optimizer from a file: its file "
                                    "(absolute)"),
    Column("optimizer_file_sha256", "str", "path.py:Name: the file's content hash (16 hex "
                                           "digits)"),
    *(column for native in native_adapters() for column in native.COLUMNS),
), families=("hp_", "stop_"), required=("model", "optimizer", "backend", "seed"),
   axes=("study", "model", "data", "data_params", "loss", "metric", "optimizer",
         "hyperparameters", "hp_", "backend", "device", "batch_size", "eval_every",
         "target_metric", "target_mode", "target_how", "seed", "repeat", "loop", "initial",
         "stopping", "stop_", *(column.name for column in TUNING)))

SCHEMA = ENGINE + RUN_COLUMNS

TRACES = side_table(
    "traces",
    Column("step", "int", "steps done (0: the initial weights)"),
    Column("seconds", "float", "training seconds so far (setup and evaluation excluded)"),
    Column("train_loss", "float", "training loss of the last step"),
    Column("val_loss", "float", "validation loss"),
    Column("val_metric", "float", "validation metric"),
    required=("step", "seconds"))

SIDE_TABLES = {"traces": TRACES}

TIMING_COLUMNS = (*VARYING, "seconds", "setup_seconds", "total_seconds", "seconds_per_step",
                  "seconds_to_target", "seconds_to_target_with_setup", "eval_seconds")
