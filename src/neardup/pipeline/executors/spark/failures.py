"""The one line a failed Spark job is reported as: its cause, and the setting that helps.

Why: a PySpark error carries a whole report (a Python traceback, a Java stack trace), and
the line that matters is buried in it. Worse, when a JVM runs out of heap the job's own
error often says nothing about it: in local mode the tasks run inside the driver's JVM,
whose `OutOfMemoryError` makes Spark stop that JVM (exit code 52) and the job ends as
`Job 0 cancelled because SparkContext was shut down` (issue 50: a `neardup add --engine
spark` of one 2.6 GB file), the cause only in the log above. So the line is built from
what is known: the error's text, the master (local: the heap is the driver's), and how
the driver's JVM ended when this process started it; an out-of-memory names the setting
that raises that heap and how to pass it.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.$]*(?:Error|Exception|Exit)\b.*)$")

# SparkExitCode.OOM: the code Spark's handler of an uncaught `OutOfMemoryError` exits with.
OOM_EXIT = 52

# What `error_text` says of a report the JVM could no longer give.
UNREADABLE = "the JVM's report could not be read"

# How a job's error reads when the driver's JVM went away under it.
_DRIVER_GONE = (
    "SparkContext was shut down",
    "Answer from Java side is empty",
    "Error while sending or receiving",
    "Error while receiving",
    "does not exist in the JVM",
    "Connection refused",
    "Connection reset",
    UNREADABLE,
)

# How long a JVM stopping itself (its shutdown hooks) is waited for, to read its exit code.
JVM_EXIT_WAIT_S = 20.0


def failure_cause(err: BaseException) -> str:
    """The one line that says why a Spark job failed.

    A PySpark error carries the executor's whole report: a Python traceback (its cause is
    the last `SomethingError: message` line) or a Java stack trace (its cause is the
    deepest `Caused by:` line, else the first line of the exception)."""
    text = error_text(err)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:
        causes = [line for line in lines if _EXCEPTION_LINE.match(line) and ":" in line]
        if causes:
            return _short(causes[-1])
    caused = [
        line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")
    ]
    if caused:
        return _short(caused[-1])
    for line in lines:
        if not line.startswith(("An error occurred while calling", "at ")):
            return _short(line.removeprefix(": "))
    return _short(type(err).__name__)


def explained(text: str, cause: str, local: bool, driver_exit: int | None) -> str:
    """`cause` (the line `failure_cause` took from the error's `text`), with what ran out
    and the setting that raises it when the failure was memory: a Java `OutOfMemoryError`
    (named in the text, or the driver's JVM ended with `OOM_EXIT`), an executor's container
    killed for its memory, or the results of a job over `spark.driver.maxResultSize`.
    `local`: the master runs the tasks in the driver's JVM. `driver_exit`: the exit code of
    the driver's JVM when it has ended (None when running, or not started here)."""
    gone = any(mark in text for mark in _DRIVER_GONE)
    if "spark.driver.maxResultSize" in text:
        return _short(f"{cause} (raise it: {_how('spark.driver.maxResultSize', '4g')})")
    if re.search(r"[Cc]ontainer killed .*memory|OOMKilled|exceeding (physical )?memory", text):
        return _short(
            f"an executor's container ran out of memory ({cause}): its Python workers live in "
            f"the overhead, raise {_how('spark.executor.memoryOverhead', '4g')}"
        )
    oom = _oom_line(text)
    if oom is None and driver_exit == OOM_EXIT:
        oom = "java.lang.OutOfMemoryError"
    if oom is not None and (local or driver_exit == OOM_EXIT or "executor driver)" in text):
        ended = f"; its JVM exited with code {driver_exit}" if driver_exit is not None else ""
        return _short(
            f"the Spark driver ran out of Java heap ({oom}{ended}): raise "
            f"{_how('spark.driver.memory', '4g')}"
        )
    if oom is not None or re.search(rf"\b(?:code|status) {OOM_EXIT}\b", text):
        return _short(
            f"a Spark executor ran out of Java heap ({oom or cause}): raise "
            f"{_how('spark.executor.memory', '4g')}"
        )
    if driver_exit is not None:
        return _short(f"{cause} (the driver's JVM exited with code {driver_exit}: see its log)")
    if gone:
        return _short(
            f"{cause} (the driver's JVM stopped: if its log shows java.lang.OutOfMemoryError, "
            f"raise {_how('spark.driver.memory', '4g')})"
        )
    return cause


def failure_line(err: BaseException, context: Any | None) -> str:
    """The one line for a failed job of the session `context` (a `SparkContext`, or None):
    `explained` with its master and, when this process started the driver's JVM and it
    has ended, its exit code (waited for a while when the error says the JVM went away:
    one that runs out of heap stops itself, its shutdown hooks first)."""
    text = error_text(err)
    master = str(getattr(context, "master", "") or "") if context is not None else ""
    going = any(mark in text for mark in _DRIVER_GONE)
    exit_code = driver_exit_code(context, JVM_EXIT_WAIT_S if going else 0.0)
    return explained(text, failure_cause(err), master.startswith("local"), exit_code)


def error_text(err: BaseException) -> str:
    """The error's text. Py4J's error for a Java exception asks the JVM for it, which
    fails when that JVM is gone (stopped for its `OutOfMemoryError`): then the Python
    side's message and the error that reading the text met."""
    try:
        return str(err)
    except Exception as unreadable:  # the JVM the text is in went away
        said = getattr(err, "errmsg", None) or type(err).__name__
        return f"{str(said).strip()} ({UNREADABLE}: {unreadable!r})"


def driver_exit_code(context: Any | None, wait_s: float) -> int | None:
    """The exit code of the driver's JVM once it has ended (waiting up to `wait_s` for a
    JVM that is stopping itself), or None: still running, or not a child of this process
    (under `spark-submit` PySpark joins a JVM it did not start)."""
    proc = getattr(getattr(context, "_gateway", None), "proc", None)
    if not isinstance(proc, subprocess.Popen):
        return None
    try:
        return proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


def _oom_line(text: str) -> str | None:
    """The `java.lang.OutOfMemoryError: ...` of the text, without its stack."""
    found = re.search(r"java\.lang\.OutOfMemoryError(?::[^\n\r]*)?", text)
    return " ".join(found.group(0).split()) if found else None


def _how(key: str, example: str) -> str:
    """The setting and how each way of starting neardup passes it."""
    flag = {"spark.driver.memory": " (spark-submit: --driver-memory " + example + ")"}
    return f"{key}, e.g. --spark-conf {key}={example}{flag.get(key, '')}"


def _short(line: str, limit: int = 400) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
