"""The Spark engine writes the embedded engine's tables, row for row (Spark in local mode)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import shared_data
from spark_session import spark  # noqa: F401 - the fixture

import neardup
from neardup.config import Settings

TABLES = ("pages", "pairs", "clusters", "links", "containment", "sketches")


def assert_same_run(embedded: Path, spark_run: Path, ignore: tuple[str, ...] = ()) -> None:
    """The Spark run's datasets (folders of part files, read in name order) hold the
    embedded run's tables row for row, in the same order, with the same types; only the
    min-hash column is a plain list (Spark has no fixed-size list) of the same values."""
    for name in TABLES:
        a = pq.read_table(embedded / f"{name}.parquet")
        assert (spark_run / f"{name}.parquet").is_dir(), name  # a dataset, not a copy
        b = pq.read_table(spark_run / f"{name}.parquet")
        assert b.schema.names == a.schema.names, name
        keep = [c for c in a.column_names if c not in ignore]
        assert a.num_rows == b.num_rows, name
        for column in keep:
            if name == "sketches" and column == "minhash":
                assert a.column(column).to_pylist() == b.column(column).to_pylist(), column
                continue
            expected, got = a.schema.field(column).type, b.schema.field(column).type
            if pa.types.is_timestamp(expected):  # the same instants; the zone's name is
                # pyarrow's ("UTC" from Parquet, "Etc/UTC" from DuckDB's Arrow schema)
                assert (got.unit, got.tz in ("UTC", "Etc/UTC")) == (expected.unit, True)
                got_column = b.column(column).cast(expected)
            else:
                assert got == expected, (name, column)
                got_column = b.column(column)
            assert a.column(column).equals(got_column), f"{name}.{column}"
    # No signature matrix is collected on the driver: the sketches dataset holds them.
    assert not (spark_run / "signatures.npy").exists()
    signatures = np.load(embedded / "signatures.npy").astype(np.int64)
    minhash = pq.read_table(spark_run / "sketches.parquet").column("minhash").to_pylist()
    assert np.array_equal(signatures, np.array(minhash, dtype=np.int64).reshape(signatures.shape))


def test_generated_crawl_gives_identical_tables(spark, demo_crawl, demo_run, tmp_path):  # noqa: F811
    result = neardup.scan(demo_crawl.warc_paths, tmp_path / "spark", engine="spark")
    assert result.summary["engine"] == "spark"
    assert_same_run(demo_run.path, result.path)
    clusters = pq.read_table(result.path / "clusters.parquet")
    assert clusters.num_rows > 0  # the comparison covered real clusters, not empty tables
    for key in ("candidate_pairs", "verified_pairs", "bands", "pairs_rows", "records"):
        if key in demo_run.summary:
            assert result.summary[key] == demo_run.summary[key], key


def test_uri_inputs_super_shingles_and_centre_rule(spark, demo_crawl, tmp_path):  # noqa: F811
    """Inputs given as URIs go through Spark's binaryFile reader; the super-shingle candidates
    and the centre rule give the embedded answer too."""
    settings = Settings(method="supershingles", cluster_rule="center")
    paths = [str(p) for p in demo_crawl.warc_paths]
    embedded = neardup.scan(paths, tmp_path / "embedded", settings=settings, workers=1)
    uris = [Path(p).resolve().as_uri() for p in paths]
    spark_run = neardup.scan(uris, tmp_path / "spark", settings=settings, engine="spark")
    assert_same_run(embedded.path, spark_run.path, ignore=("source",))
    sources = pq.read_table(spark_run.path / "pages.parquet").column("source").to_pylist()
    assert all(s.startswith("file:") for s in sources)
    assert pq.read_table(spark_run.path / "pairs.parquet").num_rows > 0


def test_a_run_without_text_writes_empty_text_parts(spark, demo_crawl, tmp_path):  # noqa: F811
    """`--no-text` on Spark: every input's `page_text` part has no rows, and the other
    tables are the embedded engine's without text too."""
    settings = Settings(keep_text=False)
    paths = [str(p) for p in demo_crawl.warc_paths]
    embedded = neardup.scan(paths, tmp_path / "embedded", settings=settings, workers=2)
    spark_run = neardup.scan(paths, tmp_path / "spark", settings=settings, engine="spark")
    assert_same_run(embedded.path, spark_run.path)
    parts = sorted((spark_run.path / "page_text.parquet").glob("*.parquet"))
    assert len(parts) == len(paths)  # one part an input, none with a row
    assert pq.read_table(spark_run.path / "page_text.parquet").num_rows == 0
    assert pq.read_table(embedded.path / "page_text.parquet").num_rows == 0
    assert pq.read_table(spark_run.path / "sketches.parquet").num_rows > 0


@pytest.mark.realdata
def test_real_warc_samples_give_identical_tables(spark, tmp_path):  # noqa: F811
    folder = shared_data("warc")
    inputs = sorted(str(p) for p in folder.iterdir() if not p.name.endswith((".wat.gz", ".wet.gz")))
    embedded = neardup.scan(inputs, tmp_path / "embedded", workers=2)
    spark_run = neardup.scan(inputs, tmp_path / "spark", engine="spark")
    assert_same_run(embedded.path, spark_run.path)
    assert embedded.summary["records"] == spark_run.summary["records"] > 1000


@pytest.mark.parametrize("where", ["driver", "executors"])
@pytest.mark.parametrize("rule", ["core", "center"])
def test_graph_clustered_on_the_driver_or_the_executors(
    spark,  # noqa: F811
    demo_crawl,
    tmp_path,
    monkeypatch,
    where,
    rule,
):
    """The verified graph is clustered on the driver up to `spark.neardup.driverGraphMaxEdges`
    edges and by large-star / small-star rounds above it; both give the embedded tables
    (super-shingles, so the identical groups are exercised too). The path not meant to run
    is made to fail, so the test knows which one did."""
    from neardup.pipeline.executors.spark import cluster_stage
    from neardup.pipeline.executors.spark.cluster_stage import DRIVER_GRAPH_CONF

    def must_not_run(jobs):
        raise AssertionError("the other clustering path ran")

    other = "cluster_distributed" if where == "driver" else "cluster_on_driver"
    monkeypatch.setattr(cluster_stage, other, must_not_run)
    settings = Settings(method="supershingles", cluster_rule=rule)
    paths = [str(p) for p in demo_crawl.warc_paths]
    embedded = neardup.scan(paths, tmp_path / "embedded", settings=settings, workers=1)
    spark.conf.set(DRIVER_GRAPH_CONF, "0" if where == "executors" else "10000000")
    try:
        spark_run = neardup.scan(paths, tmp_path / "spark", settings=settings, engine="spark")
    finally:
        spark.conf.unset(DRIVER_GRAPH_CONF)
    assert_same_run(embedded.path, spark_run.path)
    assert spark_run.summary["verified_pairs"] > 0
    identical = pq.read_table(spark_run.path / "pages.parquet").column("identical_id")
    assert len(set(identical.drop_null().to_pylist())) < identical.drop_null().length()


def test_text_corpus_without_links_gives_identical_tables(spark, tmp_path):  # noqa: F811
    """JSONL shards carry no links: the Spark run writes the empty links table without
    resolving any URL, and every table is still the embedded engine's, row for row (an
    empty input between two others owns no document id)."""
    from neardup.synth.webtext import write_webtext

    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(2):
        write_webtext(shards / f"part-{i * 2}.jsonl", 1500, first=i * 10_000)
    (shards / "part-1.jsonl").write_text("")  # an input without records between them
    embedded = neardup.scan([str(shards)], tmp_path / "embedded", workers=1)
    spark_run = neardup.scan([str(shards)], tmp_path / "spark", engine="spark")
    assert_same_run(embedded.path, spark_run.path)
    assert pq.read_table(spark_run.path / "links.parquet").num_rows == 0
    assert pq.read_table(spark_run.path / "clusters.parquet").num_rows > 0
    assert spark_run.summary["records"] == embedded.summary["records"] == 3000


def test_files_cut_into_ranges_give_identical_tables(spark, demo_crawl, tmp_path, monkeypatch):  # noqa: F811
    """With a small range target, the demo crawl's WARCs (a gzip member per record) and a
    JSONL file are cut into several ranges each, the embedded engine's ranges, one Spark
    task each: every table is the embedded engine's, row for row, the JSONL line numbers
    of the later ranges and the links between pages of different ranges included."""
    import pyarrow.compute as pc

    from neardup.ingest.input_ranges import RANGE_BYTES_VARIABLE, plan_ranges
    from neardup.ingest.readers import expand_inputs
    from neardup.synth.webtext import write_webtext

    text = tmp_path / "pages.jsonl"
    write_webtext(text, 600, copies=0.2)
    paths = [*(str(p) for p in demo_crawl.warc_paths), str(text)]
    monkeypatch.setenv(RANGE_BYTES_VARIABLE, str(128 << 10))
    ranges = plan_ranges(expand_inputs(paths))
    assert {r.cut for r in ranges} == {"members", "lines"}
    assert len(ranges) >= len(paths) + 10  # every file cut, the JSONL one in many
    embedded = neardup.scan(paths, tmp_path / "embedded", workers=2)
    spark_run = neardup.scan(paths, tmp_path / "spark", engine="spark")
    assert_same_run(embedded.path, spark_run.path)
    parts = sorted((spark_run.path / "pages.parquet").glob("*.parquet"))
    assert len(parts) == len(ranges)  # a task, and a part, per range
    pages = pq.read_table(spark_run.path / "pages.parquet")
    offsets = pages.filter(pc.equal(pages.column("source"), str(text)))
    assert offsets.column("record_offset").to_pylist() == list(range(600))  # lines go on
    assert pq.read_table(spark_run.path / "clusters.parquet").num_rows > 0
    assert pq.read_table(spark_run.path / "links.parquet").num_rows > 0
