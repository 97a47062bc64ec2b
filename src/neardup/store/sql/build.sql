-- Write the run's tables as Parquet files in the staging folder and make each a view.
-- {staging} is the staging directory (absolute, for reading and writing); views name their
-- files relative to the run, resolved through DuckDB's `file_search_path` (set by the build
-- and by `open_run`), so a run renamed into place or moved still opens. Tables are written
-- once, straight to Parquet in a fixed order, never first copied into the database: the run
-- holds each row once, and the store stage costs one pass over the data.
-- {parquet} is the COPY options.

-- pages.parquet, one row per input record (pages_of_run.sql, shared with Spark), is written
-- before this by store/pages_table.py, a range of doc ids at a time, from build_inputs.sql's views.
CREATE VIEW pages AS SELECT * FROM read_parquet('pages.parquet');

COPY (
    SELECT * FROM read_parquet('{staging}/pairs.staged.parquet') ORDER BY doc_a, doc_b
) TO '{staging}/pairs.parquet' ({parquet});
CREATE VIEW pairs AS SELECT * FROM read_parquet('pairs.parquet');

-- Contained-in pairs (broder-min / broder-mod with a containment threshold; else empty).
COPY (
    SELECT * FROM read_parquet('{staging}/containment.staged.parquet')
    ORDER BY doc_small, doc_large
) TO '{staging}/containment.parquet' ({parquet});
CREATE VIEW containment AS SELECT * FROM read_parquet('containment.parquet');

-- One row per cluster of two pages or more (clusters_of_pages.sql, shared with Spark).
COPY ({clusters_of_pages} ORDER BY size DESC, m.cluster_id) TO '{staging}/clusters.parquet' ({parquet});
CREATE VIEW clusters AS SELECT * FROM read_parquet('clusters.parquet');

-- Links. A target URL resolves to the page of that URL: a response, resource or conversion
-- record (never the request or metadata record a crawler writes beside it), the latest
-- fetch when the URL was fetched several times, following redirects (3xx with Location) up
-- to 10 hops to the final page. URLs meet by their identity `url_key` (ingest/urls.py
-- `normalize_url`, the form link targets and redirect targets are written in).
-- A WAT record's links are credited to the page of its URL, after that page's own links,
-- without repeating them. A run without links (a table of texts) resolves nothing: the
-- walk over every page's fetches took 0.4 s a million pages for an empty table.
COPY (
WITH RECURSIVE fetches AS (
    SELECT
        doc_id,
        url_key,
        CASE WHEN status BETWEEN 300 AND 399 THEN redirect_to END AS next_key,
        row_number() OVER (
            PARTITION BY url_key
            ORDER BY TRY_CAST(fetched_at AS TIMESTAMPTZ) DESC NULLS LAST, doc_id DESC
        ) AS recency
    FROM read_parquet('{staging}/pages_raw.parquet')
    WHERE url_key IS NOT NULL
      AND record_type NOT IN ('request', 'metadata', 'warcinfo', 'revisit', 'unknown',
                              'continuation')
      AND EXISTS (SELECT 1 FROM read_parquet('{staging}/links.staged.parquet'))
),
latest AS (
    SELECT doc_id, url_key, next_key FROM fetches WHERE recency = 1
),
walk AS (
    SELECT url_key AS start_key, doc_id, next_key, 0 AS hops FROM latest
    UNION ALL
    SELECT w.start_key, l.doc_id, l.next_key, w.hops + 1
    FROM walk AS w
    JOIN latest AS l ON l.url_key = w.next_key
    WHERE w.hops < 10
),
target AS (
    SELECT start_key AS url_key, arg_max(doc_id, hops) AS doc_id FROM walk GROUP BY start_key
),
raw_links AS (
    SELECT
        COALESCE(s.doc_id, l.src_doc) AS src_doc,
        l.dst_url,
        r.skipped_reason IS NOT DISTINCT FROM '{wat_reason}' AS from_wat,
        l.file_row_number
    FROM read_parquet('{staging}/links.staged.parquet', file_row_number = true) AS l
    JOIN read_parquet('{staging}/pages_raw.parquet') AS r ON r.doc_id = l.src_doc
    LEFT JOIN target AS s
        ON r.skipped_reason IS NOT DISTINCT FROM '{wat_reason}' AND s.url_key = r.url_key
),
kept AS (
    SELECT * FROM raw_links
    QUALIFY row_number() OVER (
        PARTITION BY src_doc, dst_url ORDER BY from_wat, file_row_number
    ) = 1
)
SELECT k.src_doc, k.dst_url, t.doc_id AS dst_doc
FROM kept AS k
LEFT JOIN target AS t ON t.url_key = k.dst_url
ORDER BY k.src_doc, k.from_wat, k.file_row_number
) TO '{staging}/links.parquet' ({parquet});
CREATE VIEW links AS SELECT * FROM read_parquet('links.parquet');
