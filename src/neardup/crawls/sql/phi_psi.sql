-- Per URL u in both crawls (views m and n: one row per url with its cluster):
-- phi = |C_m(u) ∩ C_n(u)| / |C_n(u)|, psi = |C_m(u) ∩ C_n(u)| / |C_m(u) ∪ C_n(u)|.
-- The intersection of u's two clusters is the set of URLs sharing both of u's cluster ids,
-- so one GROUP BY over the joined URLs gives it for every u at once.
WITH both_crawls AS (
    SELECT m.url, m.cluster AS cm, n.cluster AS cn FROM m JOIN n USING (url)
), common AS (
    SELECT cm, cn, count(*) AS common FROM both_crawls GROUP BY cm, cn
), sm AS (
    SELECT cluster AS cm, count(*) AS size_m FROM m GROUP BY cluster
), sn AS (
    SELECT cluster AS cn, count(*) AS size_n FROM n GROUP BY cluster
)
SELECT
    b.url,
    sm.size_m,
    sn.size_n,
    c.common,
    c.common / sn.size_n AS phi,
    c.common / (sm.size_m + sn.size_n - c.common) AS psi,
    size_lo(sm.size_m) AS bucket_lo,
    size_bucket(sm.size_m) AS bucket
FROM both_crawls AS b
JOIN common AS c USING (cm, cn)
JOIN sm USING (cm)
JOIN sn USING (cn)
ORDER BY b.url
