-- Input records to leave out of deduplicated output: removed pages, plus the request and
-- metadata records that belong to them (WARC-Concurrent-To in either direction).
WITH removed AS (
    SELECT doc_id, source, record_offset, record_id, concurrent_to
    FROM pages
    WHERE cluster_size >= 2 AND NOT is_representative
)
SELECT source, record_offset FROM removed
UNION
SELECT p.source, p.record_offset
FROM pages AS p
JOIN removed AS r
    ON p.source = r.source
    AND p.skipped_reason IS NOT NULL
    AND (
        (p.concurrent_to IS NOT NULL AND p.concurrent_to = r.record_id)
        OR (r.concurrent_to IS NOT NULL AND p.record_id = r.concurrent_to)
    )
ORDER BY 1, 2;
