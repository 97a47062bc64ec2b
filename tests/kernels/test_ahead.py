"""The kernels compiled ahead of time (`kernels/ahead.py`, `kernels/jit.py`): a small scan
runs them without importing numba and writes the tables the JIT writes; a module built from
other source is not used; a call they were not built for, or a large one, starts the JIT.

The reference is numba's JIT itself, in a process of its own (`NEARDUP_KERNELS=jit`): the
same source compiled another way, and numba's own `typeof` for the types a call is matched
by."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from run_tables import tables_differ

from neardup.kernels import ahead, jit

BUILD = "neardup precompile (scripts/setup.sh runs it)"


def _python(code: str, *args: str, kernels: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != jit.MODE_ENV}
    if kernels:
        env[jit.MODE_ENV] = kernels
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _imported(stderr: str) -> set[str]:
    return {ln.rsplit("|", 1)[-1].strip() for ln in stderr.splitlines() if "import time:" in ln}


def test_the_module_compiled_ahead_is_current():
    """Set-up builds it; after an edit of a kernel it is stale until built again (small
    commands then start the JIT: slower, not wrong). This test says when it is stale."""
    assert ahead._load(), f"no current module compiled ahead of time: run {BUILD}"


def _values() -> list[object]:
    base = np.arange(24, dtype=np.int64)
    frozen = np.arange(6, dtype=np.uint8)
    frozen.flags.writeable = False
    unaligned = np.frombuffer(bytes(17), dtype=np.uint8)[1:].view(np.uint64)
    return [
        base,
        base.reshape(4, 6),
        base.reshape(4, 6).T,  # Fortran order
        base[::2],  # neither
        base.reshape(4, 6)[:, :3],
        frozen,
        unaligned,
        np.zeros(0, dtype=np.uint32),
        np.zeros((0, 3), dtype=np.float32),
        np.ones(3, dtype=bool),
        np.ones(2, dtype=np.int8),
        np.ones(2, dtype=np.float64),
        7,
        -(1 << 40),
        (1 << 63) + 5,
        2.5,
        True,
        np.bool_(False),
        np.uint64(3),
        np.int32(-3),
        np.float32(1.5),
        None,
        (1, 2),
        (base, 3, True),
        (),
    ]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_a_value_is_matched_by_the_type_numba_gives_it(value):
    """The key a call is looked up by is numba's type of each argument, spelled the way the
    build spells the types it compiled: checked against `numba.typeof` itself."""
    import numba

    from neardup.kernels.ahead_build import type_key

    assert ahead.value_key(value) == type_key(numba.typeof(value))


def test_values_no_export_takes_have_no_key():
    assert ahead.value_key("text") is None
    assert ahead.value_key(np.zeros(2, dtype=">u8")) is None  # not this machine's order
    assert ahead.value_key(np.zeros(2, dtype=object)) == "object[1C]"  # no export has it
    assert ahead.value_key(1 << 64) is None
    assert ahead.value_key([1, 2]) is None


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The module set-up built, and its manifest."""
    for folder in ahead.folders():
        manifest_file = folder / ahead.MANIFEST
        if manifest_file.exists():
            manifest = json.loads(manifest_file.read_text())
            if manifest["stamp"] == ahead.stamp(manifest["sources"]):
                return folder, manifest
    pytest.fail(f"no current module compiled ahead of time: run {BUILD}")


def test_a_module_from_other_source_is_not_used(built, tmp_path, monkeypatch):
    folder, manifest = built
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(folder / manifest["file"], copy / manifest["file"])
    monkeypatch.setattr(ahead, "folders", lambda: [copy])
    (copy / ahead.MANIFEST).write_text(json.dumps(manifest))
    assert len(ahead._load()) == len(manifest["exports"])  # the copy itself is used
    (copy / ahead.MANIFEST).write_text(json.dumps({**manifest, "stamp": "0" * 64}))
    assert ahead._load() == {}  # an edit of a kernel, or another numpy or Python
    stale = {**manifest, "sources": [*manifest["sources"], "kernels/not_there.py"]}
    (copy / ahead.MANIFEST).write_text(json.dumps(stale))
    assert ahead._load() == {}
    (copy / ahead.MANIFEST).write_text(json.dumps({**manifest, "file": "gone.so"}))
    assert ahead._load() == {}
    (copy / ahead.MANIFEST).write_text("{")
    assert ahead._load() == {}


def test_every_export_names_a_kernel_and_its_types(built):
    """The manifest's exports are kernels of neardup at types an argument can have."""
    _, manifest = built
    names = {e["kernel"] for e in manifest["exports"]}
    assert "neardup.kernels.batch._sketch_kernel" in names
    assert "neardup.kernels.tokens.canonicalize_kernel" in names
    for export in manifest["exports"]:
        assert export["kernel"].startswith("neardup.")
        assert all(part for part in export["key"].split(","))
    assert len({(e["kernel"], e["key"]) for e in manifest["exports"]}) == len(manifest["exports"])


_SKETCH = """
import json, sys
import numpy as np
from neardup.config import Settings
from neardup.kernels import jit, sketch_texts
texts = json.loads(open(sys.argv[1]).read())
batch = sketch_texts(texts, Settings())
print(json.dumps({
    "jit": jit.started(),
    "minhash": np.asarray(batch.minhash).astype(np.int64).tolist(),
    "fps": [batch.lexical_fp.tolist(), batch.shingle_fp.tolist(), batch.n_tokens.tolist()],
    "supershingles": batch.supershingles.tolist(),
}))
"""


def _sketch(path: Path, kernels: str = "") -> dict:
    done = _python(_SKETCH, str(path), kernels=kernels)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    out["numba"] = "numba" in _imported(done.stderr)
    return out


@settings(max_examples=5, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.sampled_from(list("abc xyz ÄÖ É ß 日本語 ไทย\n\t-.,!")), max_size=400),
        min_size=1,
        max_size=6,
    )
)
def test_small_sketches_compiled_ahead_equal_the_jits(built, tmp_path_factory, texts):
    path = tmp_path_factory.mktemp("texts") / "texts.json"
    path.write_text(json.dumps(texts))
    small = _sketch(path)
    assert not small["jit"] and not small["numba"]  # no numba in the process at all
    reference = _sketch(path, kernels="jit")
    assert reference["jit"] and reference["numba"]
    for part in ("minhash", "fps", "supershingles"):
        assert small[part] == reference[part], part


def test_a_large_call_starts_the_jit_with_the_same_sketches(built, tmp_path):
    """Over `AHEAD_MAX_BYTES` of text the process starts the JIT (tuned to this CPU, and
    free of the interpreter lock for threads)."""
    words = [f"w{i % 9000}" for i in range(400_000)]
    texts = [" ".join(words[i : i + 2000]) for i in range(0, len(words), 2000)]
    assert sum(len(t) for t in texts) > jit.AHEAD_MAX_BYTES
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(texts))
    large = _sketch(path)
    assert large["jit"] and large["numba"]
    small_path = tmp_path / "few.json"
    small_path.write_text(json.dumps(texts[:3]))
    few = _sketch(small_path)
    assert not few["jit"]
    assert few["minhash"] == large["minhash"][:3] and few["fps"][0] == large["fps"][0][:3]


_MAIN = "import sys; sys.argv = ['neardup', *sys.argv[1:]]; import neardup.cli.main as m; m.main()"


def _scan(inputs: list[Path], out: Path, kernels: str = "") -> set[str]:
    args = ["scan", *map(str, inputs), "--out", str(out), "--workers", "1", "-q"]
    done = _python(_MAIN, *args, kernels=kernels)
    assert done.returncode == 0, done.stderr[-3000:]
    return _imported(done.stderr)


def test_a_small_scan_imports_no_numba_and_writes_the_jits_tables(built, tmp_path):
    """A generated crawl's request-first WARCs (mirrors, revisits, redirects) and a JSONL
    record: scanned with the kernels compiled ahead (no numba imported) and on the JIT,
    each in a fresh interpreter; every table and array the same."""
    from neardup.cli.main import app

    app(["demo-crawl", str(tmp_path / "crawl"), "--pages", "15"], standalone_mode=False)
    one = tmp_path / "one.jsonl"
    one.write_text(
        json.dumps({"url": "https://a.example/", "text": "a page of a few words"}) + "\n"
    )
    inputs = [*sorted((tmp_path / "crawl" / "warc").glob("*.warc.gz")), one]
    imported = _scan(inputs, tmp_path / "ahead")
    assert "numba" not in imported and "llvmlite" not in imported
    assert "neardup.kernels" in imported and "duckdb" in imported  # the report is whole
    assert "numba" in _scan(inputs, tmp_path / "jit", kernels="jit")
    summary = json.loads((tmp_path / "ahead" / "summary.json").read_text())
    assert summary["sketched"] > 20 and summary["verified_pairs"] > 0
    assert tables_differ(tmp_path / "ahead", tmp_path / "jit") == []


def test_a_scans_workers_run_large_batches_ahead_with_the_jits_tables(built, tmp_path):
    """A worker of the local engine runs its kernels on one thread, so its batches of more
    than `AHEAD_MAX_BYTES` run compiled ahead too: no process of this scan imports numba
    (the near stage's arrays are small here), and its tables are the JIT's."""
    words = [f"word{i % 5000}" for i in range(600_000)]
    inputs = []
    for f in range(3):
        path = tmp_path / f"part{f}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for i in range(120):
                start = (f * 40_000 + i * 1_500) % (len(words) - 3_000)
                text = " ".join(words[start : start + 3_000])
                out.write(json.dumps({"url": f"https://h{f}.example/{i}", "text": text}) + "\n")
        inputs.append(path)
    assert sum(p.stat().st_size for p in inputs) > 3 * jit.AHEAD_MAX_BYTES
    for name, kernels in (("ahead", ""), ("jit", "jit")):
        args = ["scan", *map(str, inputs), "--out", str(tmp_path / name), "--workers", "2", "-q"]
        done = _python(_MAIN, *args, kernels=kernels)
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stderr.splitlines()
        imported = [ln.rsplit("|", 1)[-1].strip() for ln in lines if "import time:" in ln]
        assert imported.count("neardup.kernels.jit") >= 3  # this process and both workers
        # On the JIT every process that runs a kernel starts it: the ingest's two workers
        # and the near stage's (a fresh pool, `steps/near_parts.py`); compiled ahead, none.
        numba = imported.count("numba")
        assert (numba == 0) if name == "ahead" else (3 <= numba <= 5), (name, numba)
    assert tables_differ(tmp_path / "ahead", tmp_path / "jit") == []


def test_a_kernel_is_pickled_by_name():
    """A task that names a kernel reaches a worker or an executor as that module's kernel
    there (recorded, or a dispatcher once the JIT started), never as a copy of the record."""
    import pickle

    from neardup.kernels import graph

    # the record (the module holds it, or the dispatcher where this process started the JIT)
    record = next(k for k in jit.kernels() if k.name == "neardup.kernels.graph._csr")
    assert pickle.loads(pickle.dumps(record)) is graph._csr
    done = subprocess.run(
        [sys.executable, "-c", _PICKLED],
        input=pickle.dumps(record),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [b"True", b"True"]


_PICKLED = """
import pickle, sys
from neardup.kernels import jit
from neardup.kernels import graph
jit.start()
kernel = pickle.loads(sys.stdin.buffer.read())
print(kernel is graph._csr, jit.started())
"""


_PROBED = """
import json
from neardup.kernels import jit
from neardup.kernels.graph import _centres
asked = [hasattr(_centres, name) for name in ("_pytestfixturefunction", "pytestmark", "x")]
before = jit.started()
signatures = _centres.signatures
print(json.dumps([asked, before, jit.started(), isinstance(signatures, list)]))
"""


def test_only_a_dispatchers_own_attributes_start_the_jit():
    """A library probing a kernel for attributes (pytest, inspect) starts nothing; asking
    for what a numba dispatcher has (`signatures`) starts the JIT and answers."""
    done = _python(_PROBED)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [[False, False, False], False, True, True]


def test_the_module_is_looked_for_in_neardups_one_cache_folder(monkeypatch, tmp_path):
    """Beside the kernels, then in the `kernels` folder of the cache the tokenizer's table
    and the UI's indexes use (`$NEARDUP_CACHE_DIR` where set)."""
    from neardup import cache_folder

    monkeypatch.setenv(cache_folder.CACHE_ENV, str(tmp_path / "c"))
    assert ahead.folders() == [ahead.HERE, tmp_path / "c" / "kernels"]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_a_kept_type_reads_back_as_numbas_type(value):
    """The types kept with the source (`ahead_types.json`) are spelled as the manifest
    spells them, and read back into the numba types the build compiles."""
    import numba

    from neardup.kernels.ahead_build import parse_key, type_key

    ty = numba.typeof(value)
    key = type_key(ty)
    if key is not None:
        assert parse_key(key) == ty
        assert type_key(parse_key(key)) == key


def test_the_kept_types_name_this_sources_kernels(built):
    """Every kept export is a kernel of this source at types it reads back as; the module
    set-up built from them holds each (a kept type that no longer compiles makes the build
    probe, and says so)."""
    from neardup.kernels.ahead_build import TYPES, kept_exports, type_key

    exports = kept_exports(TYPES)
    assert exports
    _, manifest = built
    in_module = {(e["kernel"], e["key"]) for e in manifest["exports"]}
    for kernel, sig in exports:
        assert (kernel.name, ",".join(type_key(t) or "?" for t in sig.args)) in in_module


_PROGRESS = """
import sys, time
from neardup.cli import kernels
from neardup.kernels import ahead_build

def step(name):
    def run(work):
        print(f"running {name}", file=sys.stderr, flush=True)
    return (name, run)

kernels.probe_steps = lambda: [step("first"), step("second")]
ahead_build.TYPES = ahead_build.Path(sys.argv[2])
def compile_exports(folder, work, exports, say, progress):
    progress.stage("compiling the exports", total=1)
    progress.note("one")
    progress.advance(1)
    progress.done()
    return 0
ahead_build.compile_exports = compile_exports
sys.argv = ["neardup", "precompile", sys.argv[1], "--probe", *sys.argv[3:]]
import neardup.cli.main as m
m.main()
"""


@pytest.mark.parametrize("quiet", [False, True])
def test_precompile_prints_a_line_as_each_probe_step_begins(tmp_path, quiet):
    """On a pipe (a log, CI) `neardup precompile` says which step it is on while it runs,
    not only at the end; `-q` says nothing."""
    args = [str(tmp_path / "out"), str(tmp_path / "types.json"), *(["-q"] if quiet else [])]
    done = _python(_PROGRESS, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [
        re.sub(r" \(\d+ s\)$", "", ln)  # the seconds the stage has taken
        for ln in done.stderr.splitlines()
        if "import time:" not in ln
    ]
    if quiet:
        assert lines == ["running first", "running second"]
        return
    assert lines[:4] == [
        "probing the kernels' types: 1/2 first",
        "running first",
        "probing the kernels' types: 2/2 second",
        "running second",
    ]
    assert lines[4].startswith("probed the kernels' types in ")
    assert lines[5] == "compiling the exports: 1/1 one"
    assert (tmp_path / "types.json").read_text().startswith('{"exports": [')


def test_the_demo_shows_its_results_without_waiting_for_a_probe():
    """`scripts/demo.sh` installs without the compile, compiles beside the crawl's
    generation (which runs no kernel), and scans after both; `scripts/test.sh` keeps the
    compile in the set-up, before the tests that check the module is current."""
    root = Path(__file__).resolve().parents[2]
    demo = (root / "scripts" / "demo.sh").read_text().splitlines()
    at = {
        key: next(i for i, ln in enumerate(demo) if key in ln and not ln.startswith("#"))
        for key in ("setup.sh", "demo-crawl", "neardup precompile", "wait", "neardup scan")
    }
    assert "--no-precompile" in demo[at["setup.sh"]]
    assert demo[at["demo-crawl"]].rstrip().endswith("&")
    assert (
        at["setup.sh"]
        < at["demo-crawl"]
        < at["neardup precompile"]
        < at["wait"]
        < at["neardup scan"]
    )
    test_sh = (root / "scripts" / "test.sh").read_text()
    assert "bash scripts/setup.sh\n" in test_sh
    setup = (root / "scripts" / "setup.sh").read_text()
    assert "neardup precompile --if-stale" in setup
