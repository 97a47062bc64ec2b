-- Skipped records by reason (the text before the first ':' groups per-record details).
SELECT split_part(skipped_reason, ':', 1) AS reason, count(*) AS records
FROM pages
WHERE skipped_reason IS NOT NULL
GROUP BY reason
ORDER BY records DESC, reason;
