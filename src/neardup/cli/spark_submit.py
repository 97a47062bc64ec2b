"""The script to hand `spark-submit`: the `neardup` command line under a cluster's session.

    spark-submit --master yarn --conf spark.pyspark.python=/opt/venv/bin/python \\
        "$(python -c 'import neardup.cli.spark_submit as s; print(s.__file__)')" \\
        scan hdfs:///crawls/2026-11/*.warc.gz --out run/ --engine spark --spark-work /shared/tmp

Under spark-submit the session takes the submit's master and settings (see `session.py`).
"""

from neardup.cli.main import app

if __name__ == "__main__":
    app()
