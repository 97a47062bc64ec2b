"""The Spark engine's ingest applies the one eligibility rule: crawler files, URL patterns
and error pages are skipped, for the same reasons, as the embedded engine skips them."""

from __future__ import annotations

import pyarrow.parquet as pq
from eligibility_crawl import write_artefact_warc
from spark_session import spark  # noqa: F401 - the fixture

import neardup
from neardup.config import Settings


def test_spark_skips_what_the_embedded_engine_skips(spark, tmp_path):  # noqa: F811
    warc = str(write_artefact_warc(tmp_path))
    settings = Settings(exclude_url=("/print/",))
    embedded = neardup.scan([warc], tmp_path / "embedded", settings=settings, workers=1)
    on_spark = neardup.scan([warc], tmp_path / "spark", settings=settings, engine="spark")
    columns = ["doc_id", "url", "skipped_reason", "cluster_id"]
    want = pq.read_table(embedded.path / "pages.parquet", columns=columns).to_pylist()
    got = pq.read_table(on_spark.path / "pages.parquet", columns=columns).sort_by("doc_id")
    assert got.to_pylist() == want
    reasons = {r["skipped_reason"] for r in want}
    assert {"crawler file (robots.txt)", "excluded by URL pattern", "HTTP status 404"} <= reasons
    assert on_spark.summary["skipped_by_reason"] == embedded.summary["skipped_by_reason"]
    assert on_spark.summary["clusters"] == embedded.summary["clusters"] == 1
