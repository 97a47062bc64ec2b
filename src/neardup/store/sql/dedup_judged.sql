-- Every sketched page with its verdict: kept (a representative or alone) or removed.
SELECT
    p.doc_id,
    p.url,
    p.cluster_id,
    r.url AS representative_url,
    p.similarity_to_representative,
    p.is_representative OR p.cluster_size < 2 AS keep
FROM pages AS p
LEFT JOIN pages AS r ON r.doc_id = p.cluster_id
WHERE p.cluster_id IS NOT NULL
ORDER BY p.doc_id;
