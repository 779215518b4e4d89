"""The regression study's tables: one row per run (the engine's columns, the spec's axes and the
run record) and its convergence trace. Declared here once; writers, readers and tests use it."""

from __future__ import annotations

from study.sweep.schema import ENGINE, VARYING, Column, Schema, side_table
from study.sweep.tuning import tuning_columns

TUNING = tuning_columns("iterations or seconds to the target; if none reached it, the lowest "
                        "suboptimality", holdout=True)

RUN_COLUMNS = Schema("runs", (
    # the spec's axes
    Column("dataset", "str", "data set name"),
    Column("dataset_params", "str", "its parameters as JSON (also as data_* columns)"),
    Column("optimizer", "str", "optimizer name"),
    Column("hyperparameters", "str", "its hyperparameters as JSON (also as hp_* columns)"),
    Column("backend", "str", "a backend of study/frameworks/registry.py"),
    Column("device", "str", "the device asked for: cpu or gpu"),
    Column("feed", "str", "the backend's feed mode (each backend's are declared in "
                          "study/frameworks/registry.py)"),
    Column("xla", "bool", "tensorflow: XLA-compiled step"),
    Column("formulation", "str", "data (X every step) or gram (X^T X once in setup)"),
    Column("dtype", "str", "float64 or float32"),
    Column("stopping", "str", "the run's stopping rules as JSON (also as stop_* columns); an "
                              "optimizer block may set its own"),
    Column("init", "str", "starting point: zeros or normal"),
    Column("seed", "int", "seed of the data set and of a random init"),
    # the learning-rate tuning protocol (study/sweep/tuning.py); empty for other runs
    *TUNING,
    # the run record
    Column("n", "int", "rows"),
    Column("d", "int", "coefficients per label column"),
    Column("iterations", "int", "iterations until a stopping rule fired"),
    Column("nfev", "int", "loss evaluations"),
    Column("ngev", "int", "gradient evaluations"),
    Column("nhvp", "int", "curvature (Hessian-vector) evaluations"),
    Column("setup_seconds", "float", "conversion, transfer, tracing, compilation: before the loop"),
    Column("seconds", "float", "the timed loop: first evaluation to the stopping iteration"),
    Column("total_seconds", "float", "setup + loop"),
    Column("seconds_per_iteration", "float", "loop seconds over iterations"),
    Column("final_loss", "float", "loss of the final iterate, recomputed in float64"),
    Column("suboptimality", "float", "(final_loss - f*) / max(f*, suboptimality_floor), float64"),
    Column("target_reached", "bool", "float64 suboptimality <= tol (None without a tol rule)"),
    Column("grad_norm", "float", "gradient norm of the final iterate, float64"),
    Column("best_suboptimality", "float", "the lowest suboptimality of the run's trace (and "
                                          "its final iterate): above `suboptimality` where "
                                          "the loss rose on the way (not monotone)"),
    Column("coefficients", "str", "the final iterate w as JSON, one list per feature (intercept "
                                  "first where one was added), one value per label column: what "
                                  "lstsq's or sklearn's coef_ is checked against"),
    Column("f_star", "float", "the certified reference optimum (datasets.reference)"),
    Column("f_star_accuracy", "float", "estimated relative accuracy of f*: |f* - exact| / "
                                      "max(f*, floor); a run is refused unless 100x below tol"),
    Column("suboptimality_floor", "float", "eps * f(0): suboptimality's divisor when f* ~ 0"),
    Column("kappa", "float", "condition number of the Hessian 2/n X^T X, columns equilibrated "
                             "(from singular values)"),
    Column("kappa_raw", "float", "condition number of the Hessian of X as given"),
    # the conditioning the bounds read, and the prediction (optimizers/bounds.py); NaN/empty in
    # rows written before they existed
    Column("kappa_standardized", "float", "least squares: the Hessian's condition number with "
                                          "the features z-scored and an intercept column "
                                          "(what standardize = true / --standardize runs)"),
    Column("hessian_mu", "float", "smallest Hessian eigenvalue as run (logistic: at w*)"),
    Column("hessian_L", "float", "largest Hessian eigenvalue as run (logistic: the global "
                                 "bound the 1/L step uses); hessian_L / hessian_mu is the "
                                 "kappa GD's and Nesterov's bounds read"),
    Column("kappa_diag_step", "float", "least squares: d / lambda_min(D^-1/2 H D^-1/2), the "
                                       "kappa GD's diag step converges at"),
    Column("initial_suboptimality", "float", "(f(w0) - f*) / f*: where the bound starts"),
    Column("predicted_iterations", "float", "iterations the method's classical bound allows "
                                            "from initial_suboptimality to tol (a prediction; "
                                            "empty where no bound applies; a float: at kappa "
                                            "1e26, NIST's Pontius raw, it passes 2**63)"),
    Column("bound", "str", "which bound (optimizers/bounds.py), or why none applies"),
    Column("slower_than_bound", "bool", "the run took more than 2x the bound's iterations (a "
                                        "bug, a bad step, rounding); not said of L-BFGS's "
                                        "ceiling nor of a float32 target below its floor"),
    Column("bound_verdict", "str", "the run against its bound, in words"),
    Column("placed_on", "str", "where the result lay (short device name, checked on a GPU)"),
    Column("device_name", "str", "the framework's full device name of the result"),
    Column("trace_clock", "str", "how the trace's seconds were read: host (a clock read per "
                                 "traced iteration) or interpolated within compiled chunks "
                                 "(JAX's fused loop, which XLA cannot time from inside)"),
    Column("fused_chunks", "int", "jax fused: calls of the compiled loop (one host read each)"),
    Column("intra_op_threads", "int", "torch: intra-op threads PyTorch used"),
    Column("blas_threads", "int", "numpy: the BLAS threads the run used "
                                  "(optimizers.blas_threads)"),
    Column("blas_threads_source", "str", "numpy: where the count came from: auto-measured (one "
                                         "thread below the machine's measured crossover, the "
                                         "library's default from it up), environment (a BLAS "
                                         "thread variable was set) or given"),
    Column("blas_threads_crossover", "int", "numpy, auto-measured: the bytes of X from which "
                                            "the library's default threads were measured "
                                            "faster (empty: at no size calibrated)"),
    Column("blas_calibration_seconds", "float", "numpy, auto-measured: what measuring the "
                                                "crossover cost in this run's process, before "
                                                "every clock (0: read from the cache)"),
    Column("read_pass_seconds", "float", "one X.sum() in the run's process: seconds per "
                                        "iteration over it = passes over X per iteration"),
    Column("tfp_iterations", "int", "lbfgs-tfp: TensorFlow Probability's own iteration count"),
    Column("tfp_converged", "bool", "lbfgs-tfp: TFP's own convergence flag"),
    Column("tfp_failed", "bool", "lbfgs-tfp: TFP's own failure flag"),
    Column("stopping_via", "str", "how the stopping rules were applied: loop (our backends), "
                                  "callback (scipy-lbfgs), iteration sweep (scipy-lsqr/lsmr, "
                                  "no callback), none (closed-form)"),
    Column("stall_patience", "int", "the iterations the stall rule waited for a new best loss: "
                                    "stop_patience, or more for a momentum method (its message "
                                    "says why)"),
    Column("momentum_beta", "float", "momentum, nesterov: the momentum the run used"),
    Column("momentum_learning_rate", "float", "momentum, nesterov: the learning rate it used"),
    Column("momentum_source", "str", "momentum, nesterov: where both came from (given, or "
                                     "the textbook choice from the Hessian's mu and L)"),
    Column("matvecs", "int", "scipy-lsqr/lsmr: products with X and X^T, initial ones included"),
    Column("scipy_istop", "int", "scipy-lsqr/lsmr: SciPy's own stop code of the final solve "
                                 "(7: iteration limit, i.e. the rules ended the run)"),
    Column("keras_class", "str", "keras:<Class>: the Keras optimizer's class"),
    Column("keras_config", "str", "keras:<Class>: its full get_config() as JSON"),
    Column("keras_version", "str", "keras:<Class>: the Keras version that ran it"),
    Column("torch_class", "str", "torch:<Class>: the torch.optim optimizer's class"),
    Column("torch_config", "str", "torch:<Class>: its defaults (every argument) as JSON"),
    Column("torch_version", "str", "torch:<Class>: the PyTorch version that ran it"),
    Column("optax_version", "str", "optax-lbfgs: the optax version that ran it"),
    Column("optimizer_file", "str", "path.py:Name, a user's own optimizer: its file (absolute)"),
    Column("optimizer_file_sha256", "str", "path.py:Name: the file's content hash (16 hex "
                                           "digits) when it ran"),
), families=("data_", "hp_", "stop_", "option_"),
   required=("dataset", "dataset_params", "optimizer", "hyperparameters", "backend", "dtype",
             "seed"),
   axes=("study", "dataset", "dataset_params", "data_", "optimizer", "hyperparameters", "hp_",
         "backend", "device", "feed", "xla", "formulation", "option_", "dtype", "init", "seed",
         "repeat", "stopping", "stop_", *(column.name for column in TUNING)))

SCHEMA = ENGINE + RUN_COLUMNS

TRACES = side_table(
    "traces",
    Column("iteration", "int", "iterations done"),
    Column("seconds", "float", "timed loop seconds so far (bookkeeping excluded)"),
    Column("loss", "float", "loss at the iterate, in the run's dtype"),
    Column("suboptimality", "float", "relative suboptimality at the iterate"),
    Column("grad_norm", "float", "gradient norm at the iterate"),
    required=("iteration", "seconds", "suboptimality"))

SIDE_TABLES = {"traces": TRACES}

# What differs between two executions of the same run (the rest must be identical on a CPU).
TIMING_COLUMNS = (*VARYING, "seconds", "setup_seconds", "total_seconds", "seconds_per_iteration",
                  "read_pass_seconds", "blas_calibration_seconds", "blas_threads_crossover")
