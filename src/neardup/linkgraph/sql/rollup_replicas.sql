-- Other copies of each head page in the crawl: its near-duplicate cluster, other pages.
SELECT h.doc_id AS head, p.url
FROM heads AS h
JOIN pages AS q ON q.doc_id = h.doc_id
JOIN pages AS p ON p.cluster_id = q.cluster_id AND p.doc_id <> q.doc_id
WHERE p.skipped_reason IS NULL
ORDER BY h.doc_id, p.doc_id;
