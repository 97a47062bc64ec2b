-- Orient and classify the candidate pairs.
-- host_a is the likely original, host_b the copy: more pages on other hosts link to host_a
-- (a partial mirror links to the primary for the pages it lacks), then more pages, then the
-- shorter name, then the name.
-- Aliases (Fetterly et al. 2004; Bharat & Broder 1999): names equal once a leading "www." is
-- dropped, or an address in common in the WARC records (pages.ip). An alias is one server
-- under two names, reported as such and never as a mirror.
-- Portable SQL: the address test is a join on host_ips, and '^www[.]' (not '^www\.') because
-- Spark SQL string literals read backslash escapes.
CREATE OR REPLACE TEMP TABLE mirror_pairs AS
WITH shared_ip AS (
    SELECT DISTINCT c.host_1, c.host_2
    FROM mirror_candidates AS c
    JOIN host_ips AS x ON x.host = c.host_1
    JOIN host_ips AS y ON y.host = c.host_2 AND y.ip = x.ip
),
ranked AS (
    SELECT
        c.*,
        s1.pages AS pages_1, s2.pages AS pages_2,
        s1.links_in AS links_in_1, s2.links_in AS links_in_2,
        si.host_1 IS NOT NULL AS ip_alias,
        (s1.links_in > s2.links_in
            OR (s1.links_in = s2.links_in AND s1.pages > s2.pages)
            OR (s1.links_in = s2.links_in AND s1.pages = s2.pages
                AND length(c.host_1) <= length(c.host_2))) AS first_is_a
    FROM mirror_candidates AS c
    JOIN host_stats AS s1 ON s1.host = c.host_1
    JOIN host_stats AS s2 ON s2.host = c.host_2
    LEFT JOIN shared_ip AS si ON si.host_1 = c.host_1 AND si.host_2 = c.host_2
),
oriented AS (
    SELECT
        CASE WHEN first_is_a THEN host_1 ELSE host_2 END AS host_a,
        CASE WHEN first_is_a THEN host_2 ELSE host_1 END AS host_b,
        CASE WHEN first_is_a THEN shared_1 ELSE shared_2 END AS shared_pages_a,
        CASE WHEN first_is_a THEN shared_2 ELSE shared_1 END AS shared_pages_b,
        CASE WHEN first_is_a THEN pages_1 ELSE pages_2 END AS pages_a,
        CASE WHEN first_is_a THEN pages_2 ELSE pages_1 END AS pages_b,
        CASE WHEN first_is_a THEN links_in_1 ELSE links_in_2 END AS links_in_a,
        CASE WHEN first_is_a THEN links_in_2 ELSE links_in_1 END AS links_in_b,
        shared_clusters,
        regexp_replace(host_1, '^www[.]', '') = regexp_replace(host_2, '^www[.]', '') AS www_alias,
        ip_alias
    FROM ranked
)
SELECT
    *,
    CASE
        WHEN www_alias THEN 'www'
        WHEN ip_alias THEN 'same address'
    END AS alias_reason
FROM oriented;
