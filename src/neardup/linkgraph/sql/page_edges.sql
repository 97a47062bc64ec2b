-- Which pages of merged trivial clusters belong to the same copy of the collection.
-- The paper grows a copy by "adding each c page to the collection containing the b page that
-- points to that c page". For every merge edge (Ri -> Rj):
--   * every page q of Rj takes one parent among the pages of Ri linking to it: a page on q's
--     own host first (a partial mirror also links to the primary's copy), then the lowest doc_id;
--   * every page p of Ri takes one child among the pages of Rj it links to on its own host
--     (lowest doc_id), so that a page whose child already chose another parent still joins.
-- With $single_site, a copy never crosses a host: cross-host parents are dropped.
CREATE OR REPLACE TEMP TABLE page_edges AS
WITH candidates AS (
    SELECT
        m.ri,
        m.rj,
        l.src AS parent,
        l.dst AS child,
        CASE WHEN ts.host = td.host THEN 1 ELSE 0 END AS same_host
    FROM merge_edges AS m
    JOIN trivial AS td ON td.rid = m.rj
    JOIN link AS l ON l.dst = td.pid
    JOIN trivial AS ts ON ts.pid = l.src AND ts.rid = m.ri
),
parents AS (
    SELECT parent, child, same_host,
        row_number() OVER (
            PARTITION BY ri, rj, child ORDER BY same_host DESC, parent
        ) AS k
    FROM candidates
),
children AS (
    SELECT parent, child,
        row_number() OVER (PARTITION BY ri, rj, parent ORDER BY child) AS k
    FROM candidates
    WHERE same_host = 1
)
SELECT parent, child FROM parents WHERE k = 1 AND (NOT $single_site OR same_host = 1)
UNION
SELECT parent, child FROM children WHERE k = 1;
