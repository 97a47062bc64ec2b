-- One row per URL among a crawl's compared pages (the first fetch when a URL repeats), with
-- its cluster (a page alone is its own cluster of one).
SELECT
    url,
    arg_min(host, doc_id) AS host,
    arg_min(coalesce(cluster_id, doc_id), doc_id) AS cluster,
    min(doc_id) AS doc_id,
    arg_min(exact_fp, doc_id) AS exact_fp
FROM read_parquet('{path}')
WHERE skipped_reason IS NULL AND url IS NOT NULL
GROUP BY url
