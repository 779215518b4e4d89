"""The feed-mode study's tables: one row per run and one row per timed call, each call timed as
*compute* (output left on the device, synchronised) plus *fetch* (its copy to the host; on the
CPU a conversion, near zero)."""

from __future__ import annotations

from study.sweep.schema import ENGINE, Column, Schema, side_table

RUN_COLUMNS = Schema("runs", (
    Column("mode", "str", "how the input reaches the network (see study.feedmode.model.MODES)"),
    Column("framework", "str", "a framework of study/frameworks/registry.py"),
    Column("api", "str", "tf1, eager or function (TensorFlow); jit (JAX); eager or compile "
                         "(PyTorch)"),
    Column("feed", "str", "the mode's way of feeding"),
    Column("model", "str", "conv-pool (the original network) or fused-conv"),
    Column("xla", "bool", "XLA-compiled (every JAX mode)"),
    Column("grappler", "str", "graph optimisation variant (TF1 modes)"),
    Column("dtype", "str", "float64 or float32"),
    Column("n", "int", "images N"),
    Column("device", "str", "cpu or gpu"),
    Column("calls", "int", "timed calls after the first"),
    Column("seed", "int", "seed of the input and kernel"),
    Column("check_n", "int", "images in the check against the NumPy reference"),
    Column("phase", "str", "the last phase entered (where a killed run stopped)"),
    Column("build_seconds", "float", "TF1 graph construction"),
    Column("session_seconds", "float", "Session creation / runtime initialisation"),
    Column("data_seconds", "float", "placing the input where the mode keeps it"),
    Column("first_call_seconds", "float", "first call, result on the host (= first_compute_seconds"
                                          " + first_fetch_seconds)"),
    Column("first_compute_seconds", "float", "of the first call, the computation, its output "
                                             "left on the device (synchronised)"),
    Column("first_fetch_seconds", "float", "of the first call, the output's copy to the host "
                                           "(on the CPU a conversion, near zero)"),
    Column("compile_seconds", "float", "JAX: of the first call, tracing, lowering and XLA "
                                       "compilation (ahead of time)"),
    Column("steady_median_seconds", "float", "median of the later calls (result on the host)"),
    Column("steady_compute_median_seconds", "float", "median of the later calls' computation, "
                                                     "output left on the device"),
    Column("steady_fetch_median_seconds", "float", "median of the later calls' copy of the "
                                                   "output to the host"),
    Column("steady_min_seconds", "float", "fastest later call"),
    Column("steady_max_seconds", "float", "slowest later call"),
    Column("first_over_steady", "float", "first call over the later calls' median"),
    Column("total_calls_seconds", "float", "first call plus the later calls"),
    Column("total_seconds", "float", "build + session + data + every call"),
    Column("graphdef_bytes", "int", "serialized GraphDef size (graph modes)"),
    Column("program_bytes", "int", "JAX: the lowered program as serialized StableHLO (MLIR "
                                   "bytecode; an embedded array is stored in it)"),
    Column("executable_bytes", "int", "JAX: the serialized XLA executable; torch.compile: what "
                                      "it wrote to its fresh cache directory"),
    Column("output_folded", "bool", "JAX: the compiled program returns a constant (XLA "
                                    "evaluated the network at compile time)"),
    Column("device_name", "str", "where the output was computed"),
    Column("output_shape", "str", "shape of the output"),
    Column("checksum", "float", "sum of the full-size output"),
    Column("checksum_stable", "bool", "every call gave the same checksum"),
    Column("check_max_abs_error", "float", "largest error against the NumPy reference"),
    Column("check_tolerance", "float", "the tolerance of that check"),
    Column("check_ok", "bool", "the check passed"),
), required=("mode",),
   axes=("mode", "framework", "api", "feed", "model", "xla", "grappler", "dtype", "n", "device",
         "calls", "seed", "check_n", "repeat"))

SCHEMA = ENGINE + RUN_COLUMNS

CALLS = side_table(
    "calls",
    Column("call", "int", "0 = the first call, then 1, 2, ..."),
    Column("kind", "str", "first or steady"),
    Column("seconds", "float", "the call, result on the host: compute_seconds + fetch_seconds"),
    Column("compute_seconds", "float", "the call with its output left on the device "
                                       "(synchronised)"),
    Column("fetch_seconds", "float", "the output's copy to the host as a NumPy array"),
    required=("call", "kind", "seconds"))

SIDE_TABLES = {"calls": CALLS}
