-- Roots (Cho et al. 2000, section 3.1): the natural entry point is the page that more other
-- web sites link to. Sites that hold a copy of the same collection do not vote: a partial
-- mirror links to the primary's copy of every page it lacks, which says nothing about where
-- the collection starts. Ties (common in a crawl of mirrors, where few sites link in): most
-- incoming links from any page, then the shorter URL, then the lower doc_id. Trivial
-- clusters are compared on their average page, so a cluster with several pages per site
-- does not win by its size.
-- ext_in (links from any other site) ranks copies: replicas linking back mark the primary.
-- Ascending keys that may be NULL say NULLS LAST: DuckDB's default, not Spark SQL's.
CREATE OR REPLACE TEMP TABLE page_rank AS
WITH comp_hosts AS (
    SELECT DISTINCT c.comp, t.host
    FROM copy_assign AS c
    JOIN trivial AS t ON t.pid = c.pid
)
SELECT
    c.pid, c.rid, c.comp, c.copy, t.host, t.url,
    count(DISTINCT CASE WHEN sp.host <> t.host THEN sp.host END) AS ext_in,
    count(DISTINCT CASE WHEN sp.host <> t.host AND ch.host IS NULL THEN sp.host END)
        AS outside_in,
    count(DISTINCT l.src) AS in_links
FROM copy_assign AS c
JOIN trivial AS t ON t.pid = c.pid
LEFT JOIN link AS l ON l.dst = c.pid
LEFT JOIN pages AS sp ON sp.doc_id = l.src
LEFT JOIN comp_hosts AS ch ON ch.comp = c.comp AND ch.host = sp.host
GROUP BY c.pid, c.rid, c.comp, c.copy, t.host, t.url;

-- The root trivial cluster of each similar cluster: where its copies start.
CREATE OR REPLACE TEMP TABLE root_rid AS
SELECT comp, rid
FROM (
    SELECT comp, rid,
        row_number() OVER (
            PARTITION BY comp
            ORDER BY avg(outside_in) DESC, avg(in_links) DESC, min(length(url)) NULLS LAST, rid
        ) AS k
    FROM page_rank
    GROUP BY comp, rid
) AS r
WHERE k = 1;

-- The root page of each copy: its page in the root trivial cluster, or, for a copy that lacks
-- it (a partial mirror), its best-ranked page.
CREATE OR REPLACE TEMP TABLE copy_root AS
SELECT copy, pid AS root_pid
FROM (
    SELECT p.copy, p.pid,
        row_number() OVER (
            PARTITION BY p.copy
            ORDER BY CASE WHEN r.rid IS NULL THEN 1 ELSE 0 END,
                     p.outside_in DESC, p.in_links DESC, length(p.url) NULLS LAST, p.pid
        ) AS k
    FROM page_rank AS p
    LEFT JOIN root_rid AS r ON r.comp = p.comp AND r.rid = p.rid
) AS x
WHERE k = 1;

-- One row per copy. Its host is the one holding most of its pages (ties: lower name).
CREATE OR REPLACE TEMP TABLE copies AS
WITH host_counts AS (
    SELECT copy, host, count(*) AS n,
        row_number() OVER (PARTITION BY copy ORDER BY count(*) DESC, host NULLS LAST) AS k
    FROM page_rank
    GROUP BY copy, host
)
SELECT
    p.comp,
    p.copy,
    cr.root_pid,
    h.host,
    count(DISTINCT p.host) AS n_hosts,
    count(*) AS pages,
    CAST(sum(p.ext_in) AS BIGINT) AS ext_in,
    min(CASE WHEN p.host = h.host THEN p.url END) AS min_url,
    max(CASE WHEN p.host = h.host THEN p.url END) AS max_url
FROM page_rank AS p
JOIN copy_root AS cr ON cr.copy = p.copy
JOIN host_counts AS h ON h.copy = p.copy AND h.k = 1
GROUP BY p.comp, p.copy, cr.root_pid, h.host;

-- The principal copy of each cluster: most links from other sites, then most pages, then the
-- lower root doc_id. Its root page names the cluster (collection_cluster_id = its doc_id).
CREATE OR REPLACE TEMP TABLE principal AS
SELECT comp, copy, root_pid
FROM (
    SELECT comp, copy, root_pid,
        row_number() OVER (PARTITION BY comp ORDER BY ext_in DESC, pages DESC, root_pid) AS k
    FROM copies
) AS x
WHERE k = 1;
