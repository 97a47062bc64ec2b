-- What candidate generation did, as candidates/buckets.py's CandidateStats counts it:
-- pairs emitted over all tables, buckets that emitted a chain, the largest bucket.
-- {keys} as in candidates.sql. Runs on Spark SQL and on DuckDB.
WITH sizes AS (SELECT tbl, key, count(*) AS n FROM {keys} GROUP BY tbl, key)
SELECT
    coalesce(sum(CASE WHEN n > {max_bucket} THEN n - 1 WHEN n > 1 THEN n * (n - 1) / 2 END), 0)
        AS emitted,
    coalesce(sum(CASE WHEN n > {max_bucket} THEN 1 ELSE 0 END), 0) AS large_buckets,
    coalesce(max(n), 0) AS largest_bucket
FROM sizes
