#!/usr/bin/env bash
# Runs the benchmark set recorded in docs/performance.md, one run after the other, each
# started only once the machine is quiet (1-minute load average below $QUIET_LOAD, waiting at
# most $QUIET_WAIT_S seconds; the load is recorded in every result either way).
#
#   bash bench/suite.sh [set]      set: core (default), load, fanout, compare, all;
#                                  topology (the dev server against the production topology of
#                                  npm run cluster, interleaved in one session; not part of all);
#                                  scale-out (1, 2 and 4 worker replicas of the production topology
#                                  at 4 history shards, interleaved, and the service's PostgreSQL load
#                                  per delivery; not part of all);
#                                  tracing (the embedded stack at 20 events/s without and with
#                                  tracing to a real OpenTelemetry Collector, interleaved; not part of all);
#                                  neighbours (every --neighbour-scenario of the noisy-neighbour run, each on
#                                  the embedded stack then on the production topology; not part of all)
#
# Results go to bench/results/suite-<time>/ (JSON + SVG per run, and suite.log). $SUITE_ARGS is added
# to every run's options, e.g. SUITE_ARGS=--quick SUITE_OUT=/tmp/smoke bash bench/suite.sh neighbours.
set -u
cd "$(dirname "$0")/.."
SET=${1:-core}
QUIET_LOAD=${QUIET_LOAD:-1.5}
QUIET_WAIT_S=${QUIET_WAIT_S:-600}
OUT=${SUITE_OUT:-bench/results/suite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
LOG="$OUT/suite.log"

wait_quiet() {
  local waited=0
  while :; do
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load" -v q="$QUIET_LOAD" 'BEGIN { exit !(l < q) }'; then break; fi
    if [ "$waited" -ge "$QUIET_WAIT_S" ]; then
      echo "  (still busy after ${waited}s: load $load; running anyway)" | tee -a "$LOG"
      break
    fi
    sleep 10
    waited=$((waited + 10))
  done
}

run() {
  local name=$1
  shift
  wait_quiet
  echo "== $name: npm run bench -- $* ${SUITE_ARGS:-} --out $OUT/$name.json" | tee -a "$LOG"
  echo "   $(uptime)" | tee -a "$LOG"
  # shellcheck disable=SC2086 # SUITE_ARGS is a list of options
  npx tsx bench/run.ts "$@" ${SUITE_ARGS:-} --out "$OUT/$name.json" >>"$LOG" 2>&1
  echo "   exit $?  $(uptime)" | tee -a "$LOG"
}

temporal_ceiling() {
  wait_quiet
  echo "== $1: the Temporal path alone (bench/experiments/temporal-path.ts)" | tee -a "$LOG"
  npx tsx bench/experiments/temporal-path.ts --workflows 1500 --concurrency 48 --variants service,local-activity \
    >"$OUT/$1.json" 2>>"$LOG"
  echo "   exit $?  $(uptime)" | tee -a "$LOG"
}

case "$SET" in
core | all)
  temporal_ceiling temporal-path-before
  run ceiling --ceiling --duration 30
  run ceiling-extra-ca --ceiling --duration 30 --trust node-extra-ca
  run max-w1 --rate max --duration 60 --webhooks 1
  run r50-w1 --rate 50 --duration 60 --webhooks 1
  run r50-w1-fail30 --rate 50 --duration 60 --webhooks 1 --fail-ratio 0.3
  ;;&
load | all)
  run r10-w1 --rate 10 --duration 30
  run r20-w1 --rate 20 --duration 30
  run r30-w1 --rate 30 --duration 30
  run r40-w1 --rate 40 --duration 30
  ;;&
fanout | all)
  run r1-w10 --rate 1 --duration 30 --webhooks 10
  run r2-w10 --rate 2 --duration 30 --webhooks 10
  run r3-w10 --rate 3 --duration 30 --webhooks 10
  run r4-w10 --rate 4 --duration 30 --webhooks 10
  run r0.2-w50 --rate 0.2 --duration 30 --webhooks 50
  run r0.4-w50 --rate 0.4 --duration 30 --webhooks 50
  run r0.6-w50 --rate 0.6 --duration 30 --webhooks 50
  run r0.8-w50 --rate 0.8 --duration 30 --webhooks 50
  ;;&
compare | all)
  run max-w1-postgres --rate max --duration 30 --postgres
  run r20-w1-postgres --rate 20 --duration 30 --postgres
  run max-w1-profile --rate max --duration 30 --cpu-prof
  temporal_ceiling temporal-path-after
  ;;
topology)
  for round in 1 2; do
    run "max-embedded-$round" --rate max --duration 30
    run "max-devserver-postgres-$round" --rate max --duration 30 --own-temporal --postgres
    run "max-cluster-w2-s4-$round" --rate max --duration 30 --cluster
    run "max-cluster-w1-s4-$round" --rate max --duration 30 --cluster --workers 1
    run "max-cluster-w2-s16-$round" --rate max --duration 30 --cluster --history-shards 16
  done
  run r20-embedded --rate 20 --duration 30
  run r20-devserver-postgres --rate 20 --duration 30 --own-temporal --postgres
  for shards in 1 4 16; do run "r20-cluster-w2-s$shards" --rate 20 --duration 30 --cluster --history-shards "$shards"; done
  run r10-embedded --rate 10 --duration 30
  run r10-cluster-w2-s4 --rate 10 --duration 30 --cluster
  ;;
scale-out)
  for round in 1 2; do
    for workers in 1 2 4; do run "max-cluster-w$workers-s4-$round" --rate max --duration 30 --cluster --workers "$workers" --history-shards 4; done
  done
  run r20-devserver-postgres --rate 20 --duration 30 --own-temporal --postgres
  ;;
tracing)
  for round in 1 2; do
    run "r20-embedded-$round" --rate 20 --duration 30
    run "r20-embedded-tracing-$round" --rate 20 --duration 30 --tracing
  done
  ;;
neighbours)
  for scenario in hanging-webhook many-webhooks many-projects publish-flood bulk-retry endpoint-recovery; do
    run "neighbour-$scenario-embedded" --noisy-neighbour --neighbour-scenario "$scenario"
    run "neighbour-$scenario-cluster" --noisy-neighbour --neighbour-scenario "$scenario" --cluster
  done
  ;;
esac
echo "results in $OUT" | tee -a "$LOG"
