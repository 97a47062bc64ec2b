-- Candidate mirror pairs (Fetterly et al. 2004): two hosts with at least $min_pages pages
-- each in clusters that have a member on the other host. Hosts with fewer than $min_pages
-- pages in clusters spanning two hosts are dropped first, which keeps the pairing small.
-- A host with itself (an "auto-mirror") is never a pair; auto_mirrors counts the hosts with
-- at least $min_pages pages in clusters of their own pages, for the report.
-- host_1 < host_2 by name here; the copy side is chosen later.
CREATE OR REPLACE TEMP TABLE mirror_candidates AS
WITH spanning AS (
    SELECT cluster_id FROM cluster_hosts GROUP BY cluster_id HAVING count(*) >= 2
),
ch AS (
    SELECT c.cluster_id, c.host, c.n
    FROM cluster_hosts AS c
    JOIN spanning AS s ON s.cluster_id = c.cluster_id
),
candidate_hosts AS (
    SELECT host FROM ch GROUP BY host HAVING sum(n) >= $min_pages
),
chc AS (
    SELECT ch.cluster_id, ch.host, ch.n
    FROM ch
    JOIN candidate_hosts AS h ON h.host = ch.host
)
SELECT
    a.host AS host_1,
    b.host AS host_2,
    CAST(sum(a.n) AS BIGINT) AS shared_1,
    CAST(sum(b.n) AS BIGINT) AS shared_2,
    count(*) AS shared_clusters
FROM chc AS a
JOIN chc AS b ON b.cluster_id = a.cluster_id AND a.host < b.host
GROUP BY a.host, b.host
HAVING sum(a.n) >= $min_pages AND sum(b.n) >= $min_pages;

CREATE OR REPLACE TEMP TABLE auto_mirrors AS
SELECT host, CAST(sum(n) AS BIGINT) AS pages
FROM cluster_hosts
WHERE n >= 2
GROUP BY host
HAVING sum(n) >= $min_pages;
