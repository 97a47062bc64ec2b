-- Candidate pairs from bucket keys, with the embedded engine's rule (candidates/buckets.py):
-- a bucket of at most {max_bucket} pages gives all its pairs, a larger one the chain of its
-- pages in page-key order (then id), so one boilerplate bucket cannot blow up the pair count
-- and the chain does not depend on input order.
-- {keys}: a table (tbl INTEGER, key BIGINT, doc_id BIGINT, order_key BIGINT), one row per
-- page and table.
-- Plain SQL with window functions: the same text runs on Spark SQL and on DuckDB.
WITH buckets AS (
    SELECT
        tbl,
        key,
        doc_id,
        count(*) OVER (PARTITION BY tbl, key) AS bucket_size,
        lead(doc_id) OVER (PARTITION BY tbl, key ORDER BY order_key, doc_id) AS next_doc
    FROM {keys}
),
small AS (
    SELECT tbl, key, doc_id FROM buckets WHERE bucket_size BETWEEN 2 AND {max_bucket}
),
emitted AS (
    SELECT least(doc_id, next_doc) AS doc_a, greatest(doc_id, next_doc) AS doc_b
    FROM buckets
    WHERE bucket_size > {max_bucket} AND next_doc IS NOT NULL
    UNION ALL
    SELECT x.doc_id AS doc_a, y.doc_id AS doc_b
    FROM small AS x
    JOIN small AS y ON x.tbl = y.tbl AND x.key = y.key AND x.doc_id < y.doc_id
)
SELECT doc_a, doc_b, count(*) AS tables FROM emitted GROUP BY doc_a, doc_b
