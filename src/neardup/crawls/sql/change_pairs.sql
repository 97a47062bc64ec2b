-- URLs compared in both crawls (views m and n): their two documents, whether the payloads
-- are byte-identical, and the size of the URL's cluster in the first crawl.
WITH sm AS (SELECT cluster, count(*) AS size_m FROM m GROUP BY cluster)
SELECT
    m.url,
    m.doc_id AS doc_m,
    n.doc_id AS doc_n,
    coalesce(m.exact_fp = n.exact_fp, false) AS same_payload,
    sm.size_m
FROM m JOIN n USING (url) JOIN sm ON sm.cluster = m.cluster
ORDER BY m.url
