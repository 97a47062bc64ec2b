-- Page change buckets of each pair of crawls, over all URLs (bucket 'all') and by the size of
-- the URL's cluster in crawl m (Fetterly et al. 2003, figure 10), in the order of
-- `comparison_order`, then cluster size, then change from complete to none.
WITH per_bucket AS (
    SELECT crawl_m, crawl_n, consecutive, cumulative, size_lo(size_m) AS bucket_lo,
           size_bucket(size_m) AS bucket, change, change_order
    FROM changes
    UNION ALL
    SELECT crawl_m, crawl_n, consecutive, cumulative, 0, 'all', change, change_order
    FROM changes
)
SELECT
    b.crawl_m, b.crawl_n, b.consecutive, b.cumulative, b.bucket, b.change, count(*) AS urls,
    count(*) / sum(count(*)) OVER (PARTITION BY b.crawl_m, b.crawl_n, b.bucket) AS share
FROM per_bucket AS b JOIN comparison_order AS o USING (crawl_m, crawl_n)
GROUP BY o.pair, b.crawl_m, b.crawl_n, b.consecutive, b.cumulative, b.bucket_lo, b.bucket,
         b.change, b.change_order
ORDER BY o.pair, b.bucket_lo, b.change_order
