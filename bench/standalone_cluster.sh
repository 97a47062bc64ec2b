#!/usr/bin/env bash
# A standalone Spark master and two one-core workers on loopback, from the classes the pyspark
# package ships (as the tests start theirs): `bench/standalone_cluster.sh start|stop`.
# The master listens on spark://127.0.0.1:7077; logs go to bench/out/cluster/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(.venv/bin/python -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "bin"))')"
logs=bench/out/cluster
mkdir -p "$logs"
export SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$logs"
case "${1:-start}" in
start)
  nohup "$bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077 \
    --webui-port 8090 > "$logs/master.log" 2>&1 &
  echo $! > "$logs/master.pid"
  sleep 5
  for n in 1 2; do
    nohup "$bin/spark-class" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 1 \
      --memory 4g --webui-port 0 --work-dir "$logs/work$n" spark://127.0.0.1:7077 \
      > "$logs/worker$n.log" 2>&1 &
    echo $! > "$logs/worker$n.pid"
  done
  sleep 8
  echo "spark://127.0.0.1:7077 (logs in $logs)"
  ;;
stop)
  for p in "$logs"/*.pid; do kill "$(cat "$p")" 2>/dev/null || true; rm -f "$p"; done
  ;;
esac
