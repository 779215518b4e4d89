"""The Dask executor against a LocalCluster of 2 single-threaded worker processes (no services)."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest
from known_lines import named, without

pytest.importorskip("distributed")

import psutil  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from convergence_study.errors import InputError  # noqa: E402
from study.__main__ import main  # noqa: E402
from study.regression.plugin import SCHEMA, SIDE_TABLES  # noqa: E402
from study.regression.schema import TIMING_COLUMNS  # noqa: E402
from study.sweep.dask import DaskExecutor, record  # noqa: E402
from study.sweep.dask_cluster import NANNY_THREAD_VARIABLES, local_cluster  # noqa: E402
from study.sweep.folder import ResultsFolder  # noqa: E402
from study.sweep.grid import load_study  # noqa: E402
from study.sweep.runner import plan_runs, run_study  # noqa: E402

# what may differ between two executions of the same run: the clock, the process, the worker
VARYING = [*TIMING_COLUMNS, "worker_address"]

SWEEP = """
name = "dask"
seeds = [0, 1]
run_timeout = 120
[stopping]
tol = 1e-8
max_iter = 3000
[[datasets]]
name = "synthetic"
n = 300
kappa = [10, 100]
[[optimizers]]
name = "gd"
step = "1/L"
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
"""

GPU_SWEEP = """
name = "gpu"
[[datasets]]
name = "synthetic"
n = 200
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
[[backends]]
name = "tensorflow"
device = "gpu"
"""

# runs long enough (a fresh interpreter, then seconds of iterations) to be caught mid-run
SLOW = """
name = "slow"
seeds = [0, 1, 2]
run_timeout = 120
[stopping]
tol = 1e-12
max_iter = 80000
[[datasets]]
name = "synthetic"
n = 2000
kappa = 1e4
[[optimizers]]
name = "gd"
step = "fixed"
learning_rate = 1e-6
[[backends]]
name = "numpy"
"""


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(2) as cluster:
        yield cluster


def write(tmp_path, text, name="study.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def runs_of(folder) -> pd.DataFrame:
    return pd.read_parquet(folder / "runs.parquet").sort_values("run_id", ignore_index=True)


@pytest.mark.slow
def test_a_dask_sweep_gives_the_rows_of_a_local_sweep(tmp_path, cluster):
    config = write(tmp_path, SWEEP)
    run_study(load_study(config), tmp_path / "local", quiet=True)
    assert main(["run", str(config), "--out", str(tmp_path / "dask"), "--quiet", "--no-adaptive",
                 "--executor", "dask", "--scheduler", cluster.scheduler_address]) == 0
    local, dask = runs_of(tmp_path / "local"), runs_of(tmp_path / "dask")
    assert len(dask) == 8 and set(dask["status"]) == {"converged"}
    # every axis, result and environment column, the thread settings included
    pd.testing.assert_frame_equal(local.drop(columns=VARYING), dask.drop(columns=VARYING))
    assert (dask["worker_host"] == socket.gethostname()).all()
    assert (local["worker_host"] == socket.gethostname()).all()
    workers = set(cluster.scheduler_info["workers"])
    assert set(dask["worker_address"]) <= workers and local["worker_address"].isna().all()
    traces = {name: pd.read_parquet(tmp_path / name / "traces.parquet")
              .sort_values(["run_id", "iteration"], ignore_index=True)
              for name in ("local", "dask")}
    pd.testing.assert_frame_equal(traces["local"].drop(columns="seconds"),
                                  traces["dask"].drop(columns="seconds"))
    assert all((tmp_path / "dask" / "logs" / f"{r}.log").exists() for r in dask["run_id"])
    # resume: the same command again runs nothing
    statuses = run_study(load_study(config), tmp_path / "dask", quiet=True,
                         executor=DaskExecutor(cluster.scheduler_address, quiet=True))
    assert not statuses


@pytest.mark.slow
def test_gpu_runs_without_gpu_workers_are_skipped_with_the_reason(tmp_path, cluster):
    study = load_study(write(tmp_path, GPU_SWEEP))
    statuses = run_study(study, tmp_path / "res", quiet=True,
                         executor=DaskExecutor(cluster.scheduler_address, quiet=True))
    assert statuses == {"converged": 1, "skipped": 1}
    runs = runs_of(tmp_path / "res").set_index("backend")
    assert runs.loc["tensorflow", "status"] == "skipped"
    assert runs.loc["tensorflow", "message"] == "no Dask worker declares a 'gpu' resource"
    assert runs.loc["numpy", "status"] == "converged"


@pytest.mark.parametrize("threads", [None, "1"],
                         ids=["the shell sets no BLAS threads", "the shell sets one"])
@pytest.mark.slow
def test_without_a_scheduler_a_local_cluster_is_started(tmp_path, capsys, monkeypatch,
                                                         threads):
    """Its workers' runs keep the shell's thread settings, not the nanny's OMP_NUM_THREADS=1;
    when the shell gives them one BLAS thread (a batch job's OMP_NUM_THREADS=1) the sweep says
    so in one line, the one tests/known_lines.py names for the tests that count lines. The
    shell's settings are set here, whatever the shell running the tests has."""
    for name in NANNY_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if threads is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
    config = write(tmp_path, SWEEP.replace("kappa = [10, 100]", "kappa = 10").replace(
        "seeds = [0, 1]", "seeds = [0]"))
    assert main(["run", str(config), "--out", str(tmp_path / "res"), "--executor", "dask",
                 "--workers", "2", "--no-adaptive"]) == 0
    printed = capsys.readouterr()
    assert "2 workers, 2 with a timing slot, 0 with a gpu" in printed.out
    warned = [line for line in printed.err.splitlines()
              if named(line, ["dask one BLAS thread"])]
    assert len(warned) == (1 if threads == "1" else 0), printed.err
    assert without(printed.err, ["dask one BLAS thread"]) == [], printed.err  # nothing else
    runs = runs_of(tmp_path / "res")
    assert len(runs) == 2 and runs["worker_address"].str.startswith("tcp://").all()
    recorded = runs["env_omp_num_threads"]
    assert (recorded == threads).all() if threads else recorded.isna().all(), recorded
    assert runs["env_openblas_num_threads"].isna().all()


def test_bad_executor_options_exit_2_before_writing(tmp_path, capsys):
    config = write(tmp_path, SWEEP)
    assert main(["run", str(config), "--out", str(tmp_path / "a"),
                 "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    assert "--scheduler and --workers need --executor dask" in capsys.readouterr().err
    assert main(["run", str(config), "--out", str(tmp_path / "a"), "--executor", "dask",
                 "--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"]) == 2
    assert not (tmp_path / "a").exists()
    # a cluster whose workers declare no timing slot would leave every run waiting forever
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as plain:
        executor = DaskExecutor(plain.scheduler_address, quiet=True, worker_wait=10)
        with pytest.raises(InputError, match="declares the 'timing_slot' resource"):
            run_study(load_study(config), tmp_path / "b", executor=executor)
    assert not (tmp_path / "b").exists()


def _fail(message):
    raise RuntimeError(message)


def test_a_task_that_fails_is_an_error_row_with_its_traceback(tmp_path, cluster):
    study = load_study(write(tmp_path, GPU_SWEEP))
    folder = ResultsFolder(tmp_path / "res", SCHEMA, SIDE_TABLES)
    folder.prepare()
    job = plan_runs(study, study.specs[:1], folder, SCHEMA.frame([]), set()).jobs[0]
    run_id = job.spec.run_id
    with Client(cluster.scheduler_address) as client:
        future = client.submit(_fail, "disk full\non the worker", retries=1)
        client.gather([future], errors="skip")
        assert record(future, job, folder)["status"] == "error"
    scanned = folder.scan()
    assert list(scanned["run_id"]) == [run_id]  # --retry-failed runs it again
    row = scanned.iloc[0]
    assert row["status"] == "error"
    assert row["message"] == "the Dask task failed: RuntimeError: disk full"
    assert "Traceback" in folder.log_path(run_id).read_text()


def test_a_cancelled_task_says_why_in_its_row(tmp_path, cluster):
    study = load_study(write(tmp_path, GPU_SWEEP))
    folder = ResultsFolder(tmp_path / "res", SCHEMA, SIDE_TABLES)
    folder.prepare()
    job = plan_runs(study, study.specs[:1], folder, SCHEMA.frame([]), set()).jobs[0]
    with Client(cluster.scheduler_address) as client:
        # never runs (no worker has the resource), so no worker thread is kept busy
        future = client.submit(time.sleep, 30, key="sleeper", resources={"nothing": 1})
        client.cancel([future], reason="scheduler-connection-lost",
                      msg="Client lost the connection to the scheduler.\nRe-run your work.")
        assert record(future, job, folder)["status"] == "error"
    row = folder.scan().iloc[0]
    assert row["message"] == ("the Dask task was cancelled (scheduler-connection-lost): Client "
                              "lost the connection to the scheduler.")


def test_dasks_own_log_lines_go_to_the_results_folder_not_the_terminal(tmp_path, capfd):
    import logging

    from study.sweep.dask import DaskLog

    # as Dask's logging configuration sets them up outside pytest: a terminal handler on the
    # top logger and on the client's, which does not pass records up
    top, client_log = logging.getLogger("distributed"), logging.getLogger("distributed.client")
    saved = [(logger, logger.handlers[:], logger.propagate) for logger in (top, client_log)]
    try:
        for logger in (top, client_log):
            logger.handlers, logger.propagate = [logging.StreamHandler(sys.stderr)], False
        log = DaskLog()
        log.open()
        client_log.error("before the folder is known")
        log.to_file(tmp_path / "dask-client.log")
        client_log.error("Failed to reconnect to scheduler")
        logging.getLogger("distributed.nanny").warning("Worker process died")  # passed up
        log.close()
        assert capfd.readouterr().err == ""
        written = (tmp_path / "dask-client.log").read_text()
        assert "Failed to reconnect" in written and "Worker process died" in written
        assert "before the folder" not in written
        client_log.error("after the sweep")  # the terminal handler is back
        assert "after the sweep" in capfd.readouterr().err
        verbose = DaskLog(enabled=False)
        verbose.open()
        client_log.error("verbose")
        verbose.close()
        assert "verbose" in capfd.readouterr().err
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate


def _executing(dask_worker):
    """Run on a worker: its pid and the keys of the tasks it executes now (the scheduler's
    processing list also holds tasks the worker has only been sent)."""
    return os.getpid(), [str(task.key) for task in dask_worker.state.executing]


def _running_run(client):
    """(run id, worker address, worker pid, run subprocess) of a run in flight, or None."""
    for address, (pid, keys) in client.run(_executing).items():
        keys = [k for k in keys if k.startswith("study-run-")]
        if len(keys) != 1:
            continue
        runs = [c for c in psutil.Process(pid).children(recursive=True) if _is_run(c, pid)]
        if runs:  # the run: a child of the worker's fork server
            return keys[0].removeprefix("study-run-"), address, pid, runs[0]
    return None


def _is_run(process, worker_pid: int) -> bool:
    """A live run process: forked by the fork server (itself the worker's child). A run that has
    just ended is a zombie until the server reaps it, and psutil cannot read its command line."""
    try:
        return ("study.sweep.forkserver" in " ".join(process.cmdline())
                and process.ppid() != worker_pid)
    except psutil.Error:  # gone or a zombie by now
        return False


def _gone_within(proc, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.slow
def test_a_worker_killed_mid_sweep_loses_and_duplicates_nothing(tmp_path, cluster):
    study = load_study(write(tmp_path, SLOW))
    out = tmp_path / "res"
    result = {}

    def sweep():
        executor = DaskExecutor(cluster.scheduler_address, quiet=True)
        result["statuses"] = run_study(study, out, quiet=True, executor=executor)

    # a daemon, and joined whatever happens: a failure here must not leave a sweep running on
    # into the cluster's teardown nor keep the test session from exiting
    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    try:
        with Client(cluster.scheduler_address) as client:
            deadline, running = time.monotonic() + 120, None
            while running is None and time.monotonic() < deadline:
                running = _running_run(client)
                time.sleep(0.02)
            assert running is not None, "no run was ever seen in flight"
            run_id, address, pid, orphan = running
            os.kill(pid, signal.SIGKILL)  # the worker process, mid-run
            gone = _gone_within(orphan, 1.0)  # its run has seconds of work left unless killed
            thread.join(timeout=200)
            assert not thread.is_alive()
            client.wait_for_workers(2, timeout=60)  # the nanny restarts it
    finally:
        thread.join(timeout=120)
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(runs["run_id"]) == sorted(s.run_id for s in study.specs)  # each exactly once
    assert set(runs["status"]) == {"max_iter"} and sum(result["statuses"].values()) == 3
    killed = runs.set_index("run_id").loc[run_id]
    assert killed["worker_address"] != address  # the killed run was run again, elsewhere
    traces = pd.read_parquet(out / "traces.parquet")
    assert not traces.duplicated(["run_id", "iteration"]).any()
    assert set(traces["run_id"]) == set(runs["run_id"])
    # the run in flight died with its worker instead of computing on beside the next run
    assert gone, "the killed worker's run process went on running"


def _silence(dask_scheduler, client_id: str) -> None:
    """Run on the scheduler: end a client's report stream as a closing scheduler can, so the
    client hears nothing more (its futures stay pending) while the scheduler goes on."""
    dask_scheduler.client_comms[client_id].send({"op": "stream-closed"})


@pytest.mark.slow
def test_a_client_that_hears_nothing_more_records_errors_instead_of_waiting_forever(
        tmp_path, cluster):
    # other seeds than the kill test's: the scheduler may still hold these runs' results
    study = load_study(write(tmp_path, SLOW.replace("seeds = [0, 1, 2]", "seeds = [5, 6, 7]")))
    out = tmp_path / "res"
    executor = DaskExecutor(cluster.scheduler_address, quiet=True, check_every=0.5)
    result = {}

    def sweep():
        result["statuses"] = run_study(study, out, quiet=True, executor=executor)

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    try:
        with Client(cluster.scheduler_address) as client:
            deadline = time.monotonic() + 120
            while _running_run(client) is None and time.monotonic() < deadline:
                time.sleep(0.02)
            client.run_on_scheduler(_silence, client_id=executor.client.id)
            thread.join(timeout=120)
            assert not thread.is_alive(), "the sweep waited forever for runs it never heard of"
    finally:
        thread.join(timeout=120)
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(runs["run_id"]) == sorted(spec.run_id for spec in study.specs)
    errors = runs[runs["status"] == "error"]
    assert len(errors) >= 1 and set(runs["status"]) <= {"error", "max_iter"}
    assert errors["message"].str.startswith("the Dask client stopped hearing").all()
    assert sum(result["statuses"].values()) == 3


@pytest.mark.slow
def test_the_runner_does_not_import_dask():
    code = ("import sys, study.__main__, study.sweep.runner; "
            "print('distributed' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
