-- Bharat & Broder's (1999) candidate method, for comparison: hosts that share many URL path
-- suffixes are mirror candidates, whatever their content. A suffix is the last arc of the
-- path (query dropped), so a copy under another prefix still matches. Suffixes found on more
-- than $max_suffix_hosts hosts (index.html, search.html) are not evidence and are dropped.
-- A candidate is confirmed, as they did by fetching pages, when at least half of the pages
-- that have a same-suffix page on the other host are near-duplicates of one (same cluster).
CREATE OR REPLACE TEMP TABLE suffix_pairs AS
WITH paths AS (
    SELECT
        doc_id,
        host,
        cluster_id,
        regexp_extract(
            regexp_replace(regexp_replace(url, '^[A-Za-z][A-Za-z0-9+.-]*://[^/]*', ''), '[?#].*$', ''),
            '([^/]+)/*$', 1
        ) AS suffix
    FROM pages
    WHERE skipped_reason IS NULL AND host IS NOT NULL
),
host_suffix AS (
    SELECT DISTINCT host, suffix FROM paths WHERE suffix <> ''
),
spread AS (
    SELECT suffix FROM host_suffix GROUP BY suffix HAVING count(*) <= $max_suffix_hosts
),
kept AS (
    SELECT h.host, h.suffix FROM host_suffix AS h JOIN spread AS s ON s.suffix = h.suffix
),
candidates AS (
    SELECT a.host AS host_1, b.host AS host_2, count(*) AS shared_suffixes
    FROM kept AS a
    JOIN kept AS b ON b.suffix = a.suffix AND a.host < b.host
    GROUP BY a.host, b.host
    HAVING count(*) >= $min_pages
),
-- Each candidate from both sides (host, other), so that the joins below are equi-joins, which
-- Spark SQL hashes and shuffles instead of testing every pair of rows.
sides AS (
    SELECT host_1, host_2, host_1 AS host, host_2 AS other FROM candidates
    UNION ALL
    SELECT host_1, host_2, host_2 AS host, host_1 AS other FROM candidates
),
matched AS (
    SELECT c.host_1, c.host_2, x.doc_id, max(CASE WHEN x.cluster_id = y.cluster_id THEN 1 ELSE 0 END) AS same
    FROM sides AS c
    JOIN paths AS x ON x.host = c.host
    JOIN paths AS y ON y.suffix = x.suffix AND y.host = c.other
    JOIN spread AS s ON s.suffix = x.suffix
    GROUP BY c.host_1, c.host_2, x.doc_id
)
SELECT
    c.host_1,
    c.host_2,
    c.shared_suffixes,
    count(m.doc_id) AS suffix_pages,
    CAST(coalesce(sum(m.same), 0) AS BIGINT) AS content_matches,
    coalesce(sum(m.same), 0) >= 0.5 * count(m.doc_id) AND count(m.doc_id) > 0 AS confirmed
FROM candidates AS c
LEFT JOIN matched AS m ON m.host_1 = c.host_1 AND m.host_2 = c.host_2
GROUP BY c.host_1, c.host_2, c.shared_suffixes;
