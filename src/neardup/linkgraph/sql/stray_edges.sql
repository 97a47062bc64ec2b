-- Pages that the growth rule left alone, in copies below the noise size ($min_size pages). A page of a partial mirror whose link into a merged
-- trivial cluster points to the primary (its own copy is missing) gets no parent or child
-- there, and a page of a folded cluster may find no copy to join. Such a small copy joins the copy of a page on its own host, in the same similar cluster, that it links
-- to or is linked from (the largest such copy, then the lowest id). Only lone pages move, so
-- two real copies on one host (say /3.11/ and /latest/) are never joined this way.
-- Copies of at least $min_size pages are never moved, and only they receive.
-- Reads copy_assign(pid, rid, comp, copy); gives (copy_x, copy_y): copy_y joins copy_x.
CREATE OR REPLACE TEMP TABLE stray_edges AS
WITH copy_size AS (
    SELECT copy, count(*) AS n FROM copy_assign GROUP BY copy
),
member AS (
    SELECT c.pid, c.comp, c.copy, t.host, cs.n
    FROM copy_assign AS c
    JOIN trivial AS t ON t.pid = c.pid
    JOIN copy_size AS cs ON cs.copy = c.copy
),
stray AS (
    SELECT pid, comp, copy, host FROM member WHERE n < greatest($min_size, 2)
),
neighbours AS (
    SELECT s.pid, s.copy, s.comp, s.host, l.dst AS other
    FROM stray AS s JOIN link AS l ON l.src = s.pid
    UNION
    SELECT s.pid, s.copy, s.comp, s.host, l.src AS other
    FROM stray AS s JOIN link AS l ON l.dst = s.pid
),
ranked AS (
    SELECT n.copy AS copy_y, o.copy AS copy_x,
        row_number() OVER (PARTITION BY n.copy ORDER BY o.n DESC, o.copy) AS k
    FROM neighbours AS n
    JOIN member AS o ON o.pid = n.other AND o.comp = n.comp AND o.host = n.host
    WHERE o.n >= greatest($min_size, 2)
)
SELECT copy_x, copy_y FROM ranked WHERE k = 1;
