-- Size buckets 1, 2-10, 11-100, 101-1000, ... (Fetterly et al. 2003, figures 3-5) and the
-- page-change buckets of Fetterly et al. (2003, table 1) scaled from K = 84 to any K.
CREATE OR REPLACE MACRO size_lo(s) AS
    CASE WHEN s = 1 THEN 1 ELSE CAST(10 ^ (length(CAST(s - 1 AS VARCHAR)) - 1) AS BIGINT) + 1 END;
CREATE OR REPLACE MACRO size_bucket(s) AS
    CASE WHEN s = 1 THEN '1'
         ELSE CAST(size_lo(s) AS VARCHAR) || '-' || CAST(CAST(10 ^ length(CAST(s - 1 AS VARCHAR)) AS BIGINT) AS VARCHAR)
    END;
CREATE OR REPLACE MACRO change_bucket(agree, k) AS
    CASE WHEN agree = k + 1 THEN 'no change'
         WHEN agree = k THEN 'no text change'
         WHEN agree = 0 THEN 'complete'
         WHEN agree <= k // 3 THEN 'large'
         WHEN agree <= (2 * k) // 3 THEN 'medium'
         ELSE 'small'
    END;
CREATE OR REPLACE MACRO change_order(agree, k) AS
    CASE WHEN agree = k + 1 THEN 5 WHEN agree = k THEN 4 WHEN agree = 0 THEN 0
         WHEN agree <= k // 3 THEN 1 WHEN agree <= (2 * k) // 3 THEN 2 ELSE 3 END;
