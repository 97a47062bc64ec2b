-- The link graph between crawled pages, as link(src, dst): one row per distinct pair,
-- self-links dropped (they carry no information about collections).
CREATE OR REPLACE TEMP TABLE link AS
SELECT DISTINCT src_doc AS src, dst_doc AS dst
FROM links
WHERE dst_doc IS NOT NULL AND src_doc <> dst_doc;
