-- One row per similar cluster of collections that is not noise (Cho et al.: collections of
-- fewer than 10 pages are noise). A copy of fewer than $min_size pages is noise too (a stray
-- alias page, a lone exact copy under another path): it is neither listed nor counted in the
-- cardinality, and a cluster needs two copies that are not noise.
-- Ordered like the paper's table of popular collections: cardinality, then size.
-- sites: array_sort(array_agg(DISTINCT ...)) is spelt the same in DuckDB and Spark SQL.
SELECT
    pr.root_pid AS collection_cluster_id,
    coalesce(nullif(trim(rp.title), ''), rp.url) AS description,
    count(*) AS cardinality,
    max(c.pages) AS size,
    CAST(sum(c.pages) AS BIGINT) AS pages,
    rp.url AS principal_url,
    rp.host AS principal_host,
    array_sort(array_agg(DISTINCT c.host)) AS sites
FROM copies AS c
JOIN principal AS pr ON pr.comp = c.comp
JOIN pages AS rp ON rp.doc_id = pr.root_pid
WHERE c.pages >= $min_size
GROUP BY pr.root_pid, rp.title, rp.url, rp.host
HAVING count(*) >= 2
ORDER BY cardinality DESC, size DESC, collection_cluster_id;
