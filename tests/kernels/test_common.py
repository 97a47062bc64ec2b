"""The common-shingle filter (Broder §5.1) as a count-min sketch."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.config import Settings, SettingsError
from neardup.kernels import (
    CommonShingles,
    canonicalize,
    doc_shingle_counts,
    shingle_hashes,
    sketch_batch,
    sketch_text,
)

S = Settings(shingle_size=2, max_shingle_df=2)


def _docs() -> list[str]:
    # "click here" is in 4 documents (> max_df = 2); "rare words" in one.
    docs = [f"click here for page {i} of the site" for i in range(4)]
    docs.append("some rare words")
    return docs


def _filter(docs: list[str], settings: Settings = S, width: int = 1 << 12) -> CommonShingles:
    common = CommonShingles.empty(settings, width=width)
    common.add(*doc_shingle_counts([canonicalize(d) for d in docs], settings))
    return common


def _fp(text: str) -> np.ndarray:
    return shingle_hashes(text, S.shingle_size, S.wrap_shingles, S.seed)


def test_common_shingle_removed_rare_kept() -> None:
    common = _filter(_docs())
    click, rare = _fp("click here")[0], _fp("rare words")[0]
    of_the = _fp("of the")[0]  # in 4 docs too
    page_0 = _fp("page 0")[0]  # in one doc
    mask = common.is_common(np.array([click, rare, of_the, page_0], dtype=np.uint64))
    assert mask.tolist() == [True, False, True, False]
    assert common.n_common_estimate >= 5  # click here, here for, for page, of the, the site

    batch = sketch_batch([canonicalize(d) for d in _docs()], S, common)
    # "click here for page 0 of the site": 7 shingles, 5 of them common.
    assert batch.n_shingles[0] == 2 and batch.n_common[0] == 5
    assert batch.n_shingles[4] == 2 and batch.n_common[4] == 0
    single = sketch_text(_docs()[0], S, common)
    assert click not in single.shingles and page_0 in single.shingles
    assert np.array_equal(single.minhash, batch.minhash[0])
    assert single.shingle_fp == batch.shingle_fp[0]


def test_never_undercounts() -> None:
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 2**64, size=20_000, dtype=np.uint64)
    counts = rng.integers(1, 50, size=hashes.size)
    common = CommonShingles.empty(S.replace(max_shingle_df=30), depth=2, width=1 << 12)
    common.add(hashes, counts)
    est = common.estimate(hashes)
    assert np.all(est >= counts)
    assert common.total == counts.sum()
    assert np.all(common.is_common(hashes[counts > 30]))
    # Wide enough for these 20k shingles: most estimates exact.
    wide = CommonShingles.empty(S, width=1 << 20)
    wide.add(hashes, counts)
    assert np.mean(wide.estimate(hashes) == counts) > 0.95


def test_batches_add_up_in_any_split() -> None:
    docs = _docs() * 3
    whole = _filter(docs)
    parts = CommonShingles.empty(S, width=1 << 12)
    for chunk in (docs[:5], docs[5:11], docs[11:]):
        part = _filter(chunk)
        parts.merge(part)
    assert np.array_equal(whole.table, parts.table) and whole.total == parts.total


def test_save_load_memory_map(tmp_path) -> None:  # type: ignore[no-untyped-def]
    common = _filter(_docs())
    path = tmp_path / "common.npy"
    common.save(path)
    loaded = CommonShingles.load(path, mmap=True)
    assert isinstance(loaded.table, np.memmap) or isinstance(loaded.table.base, np.memmap)
    assert np.array_equal(loaded.table, common.table)
    assert (loaded.max_df, loaded.seed, loaded.shingle_size, loaded.wrap, loaded.total) == (
        common.max_df,
        common.seed,
        common.shingle_size,
        common.wrap,
        common.total,
    )
    hashes = _fp("click here for page 0 of the site")
    assert np.array_equal(loaded.is_common(hashes), common.is_common(hashes))
    batch = sketch_batch([canonicalize(d) for d in _docs()], S, loaded)
    assert batch.n_common[0] == 5
    with pytest.raises(ValueError):
        loaded.add(hashes)
    np.save(tmp_path / "other.npy", np.zeros(10, dtype=np.uint32))
    with pytest.raises(ValueError):
        CommonShingles.load(tmp_path / "other.npy")


def test_settings_must_match() -> None:
    common = _filter(_docs())
    with pytest.raises(SettingsError):
        sketch_batch(["a b c"], S.replace(seed=2), common)
    with pytest.raises(SettingsError):
        sketch_batch(["a b c"], S.replace(max_shingle_df=3), common)


def test_disabled_filter_drops_nothing() -> None:
    off = S.replace(max_shingle_df=0)
    common = _filter(_docs(), off)
    assert not common.is_common(_fp("click here")).any()
    assert sketch_batch([canonicalize(_docs()[0])], off, common).n_common[0] == 0


def test_false_flag_bound() -> None:
    # The documented sizing: 1M pages x 1000 shingles, max_df 1000, 3 rows of 2^24 counters.
    default = CommonShingles.empty(Settings(max_shingle_df=1000))  # calloc'd: no memory is touched
    assert (default.depth, default.width, default.max_df) == (3, 1 << 24, 1000)
    assert default.false_flag_bound(total=10**9) == pytest.approx(2.1e-4, rel=0.05)
    assert default.false_flag_bound(total=0) == 0.0
    assert default.false_flag_bound(total=10**12) == 1.0
