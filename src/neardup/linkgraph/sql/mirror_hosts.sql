-- Hosts and their page clusters, for mirror detection (Fetterly et al. 2004, section 4).
--   host_stats(host, pages, links_in): compared pages; pages on other hosts linking in (the
--     host rank that decides which side of a pair is the copy).
--   host_ips(host, ip): the addresses each host was fetched from (WARC-IP-Address). A table
--     rather than a list column per host: list aggregates and list intersection have no
--     spelling that DuckDB and Spark SQL share, a join does.
--   cluster_hosts(cluster_id, host, n): pages of each host in each near-duplicate cluster of
--     two or more pages.
CREATE OR REPLACE TEMP TABLE host_stats AS
WITH compared AS (
    SELECT doc_id, host FROM pages WHERE skipped_reason IS NULL AND host IS NOT NULL
),
inbound AS (
    SELECT d.host, count(DISTINCT l.src_doc) AS links_in
    FROM links AS l
    JOIN compared AS d ON d.doc_id = l.dst_doc
    JOIN pages AS s ON s.doc_id = l.src_doc
    WHERE s.host <> d.host
    GROUP BY d.host
)
SELECT
    c.host,
    count(*) AS pages,
    coalesce(max(i.links_in), 0) AS links_in
FROM compared AS c
LEFT JOIN inbound AS i ON i.host = c.host
GROUP BY c.host;

CREATE OR REPLACE TEMP TABLE host_ips AS
SELECT DISTINCT host, ip
FROM pages
WHERE skipped_reason IS NULL AND host IS NOT NULL AND ip IS NOT NULL;

CREATE OR REPLACE TEMP TABLE cluster_hosts AS
SELECT cluster_id, host, count(*) AS n
FROM (
    SELECT cluster_id, host, count(*) OVER (PARTITION BY cluster_id) AS size
    FROM pages
    WHERE skipped_reason IS NULL AND cluster_id IS NOT NULL AND host IS NOT NULL
) AS p
WHERE size >= 2
GROUP BY cluster_id, host;
