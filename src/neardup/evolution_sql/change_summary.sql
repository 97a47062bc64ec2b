-- Page change buckets by first-crawl cluster size (Fetterly et al. 2003, table 1).
SELECT
    crawl_m, crawl_n, size_bucket(size_m) AS bucket, change, count(*) AS urls,
    count(*) / sum(count(*)) OVER (PARTITION BY crawl_m, crawl_n, size_bucket(size_m)) AS share
FROM changes
GROUP BY crawl_m, crawl_n, size_lo(size_m), size_bucket(size_m), change, change_order
ORDER BY crawl_m, crawl_n, size_lo(size_m), change_order
