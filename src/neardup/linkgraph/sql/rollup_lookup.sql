-- The pages behind a ranked list of URLs: ranked(rank, url) joined to the run's pages (the
-- first compared record of a URL, fragment dropped) and to collections(doc_id, ...).
SELECT
    r.rank,
    r.url,
    p.doc_id,
    p.title,
    p.host,
    p.cluster_id,
    p.cluster_size,
    c.collection_cluster_id,
    c.collection_id
FROM ranked AS r
LEFT JOIN (
    SELECT doc_id, url, title, host, cluster_id, cluster_size,
        row_number() OVER (PARTITION BY url ORDER BY doc_id) AS k
    FROM pages
    WHERE skipped_reason IS NULL
) AS p ON p.url = regexp_replace(r.url, '#.*$', '') AND p.k = 1
LEFT JOIN collection_pages AS c ON c.doc_id = p.doc_id
ORDER BY r.rank;
