-- Each assignment row with the size of its cluster ({assignments}: the clustering's rows).
-- Cluster sizes ride on the assignment rows, so the pages meet one table on doc_id
-- (pages_of_run.sql): the embedded build reads this as a subquery, the Spark engine computes
-- it as one job and hands each input's rows to the task that writes that input's pages.
SELECT *, count(*) OVER (PARTITION BY cluster_id) AS cluster_size FROM {assignments}
