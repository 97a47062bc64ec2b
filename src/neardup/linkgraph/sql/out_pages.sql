-- collections.parquet: one row per page of a kept collection (copies that are noise left out).
SELECT
    pr.root_pid AS collection_cluster_id,
    cr.root_pid AS collection_id,
    p.pid AS doc_id,
    p.url,
    p.host,
    p.pid = cr.root_pid AS is_root
FROM page_rank AS p
JOIN principal AS pr ON pr.comp = p.comp
JOIN copy_root AS cr ON cr.copy = p.copy
JOIN copies AS c ON c.copy = p.copy AND c.pages >= $min_size
WHERE pr.root_pid IN (SELECT collection_cluster_id FROM kept_clusters)
ORDER BY collection_cluster_id, collection_id, doc_id;
