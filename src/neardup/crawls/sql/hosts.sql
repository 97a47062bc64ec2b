-- Hosts present in both crawls, and how many of them occur in the same number of distinct
-- clusters in both (Fetterly et al. 2003, section 4: 91.8 % over eleven weeks).
WITH hm AS (SELECT host, count(DISTINCT cluster) AS clusters FROM m GROUP BY host),
     hn AS (SELECT host, count(DISTINCT cluster) AS clusters FROM n GROUP BY host)
SELECT
    count(*) AS hosts,
    count(*) FILTER (WHERE hm.clusters = hn.clusters) AS same_clusters,
    coalesce(count(*) FILTER (WHERE hm.clusters = hn.clusters) / nullif(count(*), 0), 0.0) AS share
FROM hm JOIN hn USING (host)
