-- Averages of phi and psi by first-crawl cluster size (Fetterly et al. 2003, figures 3-5).
SELECT crawl_m, crawl_n, bucket, count(*) AS urls, avg(phi) AS phi, avg(psi) AS psi
FROM phi_psi
GROUP BY crawl_m, crawl_n, bucket, bucket_lo
ORDER BY crawl_m, crawl_n, bucket_lo
