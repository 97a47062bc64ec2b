-- Break points (Cho et al. 2000, section 2): one copy whose page changed (a stale release)
-- splits a collection in two, since |Ri| = s fails at that page. The paper suggests a second
-- phase that joins similar clusters connected across such a break; this is it.
-- Cluster Y folds into cluster X when every copy of Y is linked from a copy of X on its own
-- host (d = |Y|) and X has as many copies (or more, with $extended): Y is then a part of the
-- sites that X copies, which the changed copy merely lacks (the merge condition at the level
-- of whole clusters, without |X| = s).
-- Each copy of Y joins the copy of X on its host that links to it (the largest, then the lowest
-- copy id). Folding repeats until nothing changes, since a cluster may only qualify once the
-- clusters that link to it have folded.
-- Reads copy_assign(pid, rid, comp, copy). NULLS LAST spells out DuckDB's default for Spark.
CREATE OR REPLACE TEMP TABLE fold_edges AS
WITH copy_host AS (
    SELECT copy, comp, host, pages
    FROM (
        SELECT c.copy, c.comp, t.host, CAST(sum(count(*)) OVER (PARTITION BY c.copy) AS BIGINT) AS pages,
            row_number() OVER (PARTITION BY c.copy ORDER BY count(*) DESC, t.host NULLS LAST) AS k
        FROM copy_assign AS c
        JOIN trivial AS t ON t.pid = c.pid
        GROUP BY c.copy, c.comp, t.host
    ) AS x
    WHERE k = 1
),
cardinality AS (
    SELECT comp, count(*) AS n FROM copy_host GROUP BY comp
),
copy_links AS (
    SELECT DISTINCT
        cs.comp AS comp_x, cs.copy AS copy_x, hs.pages AS pages_x, cd.comp AS comp_y,
        cd.copy AS copy_y
    FROM link AS l
    JOIN copy_assign AS cs ON cs.pid = l.src
    JOIN copy_assign AS cd ON cd.pid = l.dst
    JOIN copy_host AS hs ON hs.copy = cs.copy
    JOIN copy_host AS hd ON hd.copy = cd.copy
    WHERE cs.comp <> cd.comp AND hs.host = hd.host
),
qualified AS (
    SELECT cl.comp_x, cl.comp_y
    FROM copy_links AS cl
    JOIN cardinality AS nx ON nx.comp = cl.comp_x
    JOIN cardinality AS ny ON ny.comp = cl.comp_y
    GROUP BY cl.comp_x, cl.comp_y, nx.n, ny.n
    HAVING count(DISTINCT cl.copy_y) = ny.n AND (nx.n = ny.n OR ($extended AND nx.n > ny.n))
),
chosen AS (
    SELECT cl.copy_x, cl.copy_y,
        row_number() OVER (
            PARTITION BY cl.comp_x, cl.copy_y ORDER BY cl.pages_x DESC, cl.copy_x
        ) AS k
    FROM copy_links AS cl
    JOIN qualified AS q ON q.comp_x = cl.comp_x AND q.comp_y = cl.comp_y
)
SELECT copy_x, copy_y FROM chosen WHERE k = 1;
