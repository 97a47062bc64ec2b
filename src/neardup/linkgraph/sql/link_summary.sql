-- LinkSummary (Cho et al. 2000, Figure 8): for every ordered pair of trivial clusters (Ri, Rj)
-- joined by at least one link:
--   a = |Ri|, b = |Rj|,
--   s = pages of Ri with a link to at least one page of Rj,
--   d = pages of Rj with a link from at least one page of Ri.
-- With $single_site, a link counts when it stays on its host, or when the host of its source
-- holds no page of Rj at all: a partial mirror links to the primary's copy of a page it lacks,
-- the "virtual link" that the extended condition is there to accept.
CREATE OR REPLACE TEMP TABLE link_summary AS
WITH sizes AS (
    SELECT rid, count(*) AS n FROM trivial GROUP BY rid
),
rid_hosts AS (
    SELECT DISTINCT rid, host FROM trivial
),
edges AS (
    SELECT ts.rid AS ri, td.rid AS rj, l.src, l.dst, ts.host AS src_host, td.host AS dst_host
    FROM link AS l
    JOIN trivial AS ts ON ts.pid = l.src
    JOIN trivial AS td ON td.pid = l.dst
    WHERE ts.rid <> td.rid
),
counted AS (
    SELECT e.ri, e.rj, e.src, e.dst
    FROM edges AS e
    LEFT JOIN rid_hosts AS h ON h.rid = e.rj AND h.host = e.src_host
    WHERE NOT $single_site OR e.src_host = e.dst_host OR h.rid IS NULL
)
SELECT
    c.ri,
    c.rj,
    si.n AS a,
    sj.n AS b,
    count(DISTINCT c.src) AS s,
    count(DISTINCT c.dst) AS d
FROM counted AS c
JOIN sizes AS si ON si.rid = c.ri
JOIN sizes AS sj ON sj.rid = c.rj
GROUP BY c.ri, c.rj, si.n, sj.n;
