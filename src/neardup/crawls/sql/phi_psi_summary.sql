-- Averages of phi and psi by the size of u's cluster in crawl m (Fetterly et al. 2003,
-- figures 4 and 5, where m is the first crawl), one block per pair of crawls compared, in the
-- order of `comparison_order`.
SELECT p.crawl_m, p.crawl_n, p.consecutive, p.cumulative, p.bucket,
       count(*) AS urls, avg(p.phi) AS phi, avg(p.psi) AS psi
FROM phi_psi AS p JOIN comparison_order AS o USING (crawl_m, crawl_n)
GROUP BY o.pair, p.crawl_m, p.crawl_n, p.consecutive, p.cumulative, p.bucket, p.bucket_lo
ORDER BY o.pair, p.bucket_lo
