"""The same document in different formats is found as a near-duplicate (Cho et al.:
replicas in "different formats"), and HTML folders scan like crawls."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
from pdfs import make_pdf
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

import neardup
from neardup.synth import stdlib_documents


def response(writer: WARCWriter, url: str, content_type: str, body: bytes) -> None:
    headers = StatusAndHeaders(
        "200 OK",
        [("Content-Type", content_type), ("Content-Length", str(len(body)))],
        protocol="HTTP/1.1",
    )
    record = writer.create_warc_record(
        url, "response", payload=io.BytesIO(body), http_headers=headers
    )
    writer.write_record(record)


def test_pdf_and_html_versions_of_one_document_cluster_together(tmp_path):
    docs = stdlib_documents(min_words=200, limit=3)
    words = docs[0].words[:300]
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    html = (
        "<html><head><title>Doc</title></head><body>"
        + "".join(f"<p>{line}</p>" for line in lines)
        + "</body></html>"
    ).encode()
    other = "<html><body><p>" + " ".join(docs[1].words[:300]) + "</p></body></html>"
    path = tmp_path / "formats.warc.gz"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        response(writer, "http://a.example/doc.html", "text/html", html)
        response(writer, "http://b.example/doc.pdf", "application/pdf", make_pdf(lines))
        response(writer, "http://c.example/other.html", "text/html", other.encode())
    run = neardup.scan([path], tmp_path / "run", workers=1)
    pages = {p["url"]: p for p in pq.read_table(run.path / "pages.parquet").to_pylist()}
    pdf, page = pages["http://b.example/doc.pdf"], pages["http://a.example/doc.html"]
    assert pdf["format"] == "pdf" and page["format"] == "html"
    assert pdf["cluster_id"] == page["cluster_id"]
    assert pages["http://c.example/other.html"]["cluster_size"] == 1


def test_html_folder_with_base_url(tmp_path):
    docs = stdlib_documents(min_words=200, limit=2)
    body = "<html><body><p>" + " ".join(docs[0].words[:250]) + "</p></body></html>"
    for name in ("a/index.html", "b/copy.html"):
        target = tmp_path / "site" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    unrelated = "<html><body><p>" + " ".join(docs[1].words[:250]) + "</p></body></html>"
    (tmp_path / "site" / "c.html").write_text(unrelated)
    run = neardup.scan(
        [tmp_path / "site"], tmp_path / "run", workers=1, base_url="https://docs.example/"
    )
    pages = {p["url"]: p for p in pq.read_table(run.path / "pages.parquet").to_pylist()}
    a, b = pages["https://docs.example/a/index.html"], pages["https://docs.example/b/copy.html"]
    # One cluster; its representative is whichever copy has the lower URL key, not the
    # first read (ties follow the page key, see steps/near_pairs.py).
    assert a["cluster_id"] == b["cluster_id"] in (a["doc_id"], b["doc_id"])
    assert pages["https://docs.example/c.html"]["cluster_size"] == 1
