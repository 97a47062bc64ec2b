-- Trivial clusters (Cho, Shivakumar & Garcia-Molina 2000, Definition 8 with collections of one
-- page): the near-duplicate clusters of two or more compared pages, as trivial(rid, pid).
-- Reads the run's `pages` table; portable SQL (window count, no engine-specific function).
CREATE OR REPLACE TEMP TABLE trivial AS
SELECT rid, pid, host, url
FROM (
    SELECT
        cluster_id AS rid,
        doc_id AS pid,
        host,
        url,
        count(*) OVER (PARTITION BY cluster_id) AS n
    FROM pages
    WHERE skipped_reason IS NULL AND cluster_id IS NOT NULL
) AS t
WHERE n >= 2;
