-- What a crawler saves by skipping each avoid-list entry (Cho et al. 2000, section 5.1).
-- avoid_entries(prefix, ...) holds scheme-less prefixes ("host/path/"), so http and https
-- fetches of the same path are both counted. A fetched record is a response, resource or
-- revisit (requests and metadata are not fetches of their own). A record under two entries
-- counts for the first (lowest entry_order) only, so the totals add up.
-- `left(x, length(p)) = p` is the prefix test both engines spell the same (DuckDB names it
-- starts_with, Spark SQL startswith).
CREATE OR REPLACE TEMP TABLE avoid_hits AS
WITH fetched AS (
    SELECT
        doc_id,
        regexp_replace(url, '^[A-Za-z][A-Za-z0-9+.-]*://', '') AS bare,
        coalesce(payload_bytes, 0) AS bytes
    FROM pages
    WHERE url IS NOT NULL
      AND coalesce(record_type, 'response') NOT IN ('request', 'warcinfo', 'metadata')
),
hits AS (
    SELECT
        e.entry_order,
        f.doc_id,
        f.bytes,
        row_number() OVER (PARTITION BY f.doc_id ORDER BY e.entry_order) AS k
    FROM avoid_entries AS e
    JOIN fetched AS f ON left(f.bare, length(e.prefix)) = e.prefix
)
SELECT entry_order, doc_id, bytes FROM hits WHERE k = 1;
