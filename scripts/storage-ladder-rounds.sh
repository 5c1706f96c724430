#!/usr/bin/env bash
# Runs one rate of the storage ladder (section S5) on each layout in turn,
# ROUNDS times, and prints every run and each side's median: on a shared
# 2-core machine one 20 s step of each side, one after the other, differs
# by more from run to run than the layouts differ.
#
#   scripts/storage-ladder-rounds.sh [RATE] [ROUNDS] [SIDES...]
#
# RATE defaults to 2500 (events/s), ROUNDS to 3. A side is today (the
# baseline binary), new (this checkout, the ladder's config), new-off (the
# same with the change stream off: `changes: {publish: false}`) or new:FILE
# (FILE replaces the ladder's retention keys in the config); a side ending
# in @DIR builds its new layout from the checkout in DIR (a worktree of
# another commit) instead of this one. Each round runs the sides in another
# order (rotated by one), so no side always runs first or last.
# Defaults: today new-off new.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-2500}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
sides=("$@")
[ ${#sides[@]} -gt 0 ] || sides=(today new-off new)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/hookyard-bench
go build -o "$bin" ./cmd/hookyard-bench
# The retention keys the ladder gives the new side (storage.go), and the
# change stream off.
cat >"$tmp/new-off.yaml" <<'YAML'
retention:
  min_purge_age: 1s
  payload_age: 3m0s
  partition_interval: 1m0s
  history_age: 3m0s
  dead_payload_age: 3m0s
reconciler:
  interval: 10s
changes:
  publish: false
YAML
results=$(mktemp)
n=${#sides[@]}
for r in $(seq 1 "$rounds"); do
  for i in $(seq 0 $((n - 1))); do
    label=${sides[$(( (i + r - 1) % n ))]}
    side=${label%@*}
    dir=.
    [ "$side" = "$label" ] || dir=${label#*@}
    case $side in
      today) args=(-storage-sides today) ;;
      new) args=(-storage-sides new) ;;
      new-off) args=(-storage-sides new -storage-new-config "$tmp/new-off.yaml") ;;
      new:*) args=(-storage-sides new -storage-new-config "${side#new:}") ;;
      *) echo "unknown side $side" >&2; exit 2 ;;
    esac
    out=$(cd "$dir" && "$bin" -storage -storage-parts ladder "${args[@]}" -storage-ladder-start "$rate" -storage-ladder-max-steps 1 2>&1)
    json=$dir/$(grep -o 'bench-results/[^ ]*\.json' <<<"$out" | tail -1)
    python3 - "$json" "$label" "$r" "$rate" >>"$results" <<'PY'
import json, sys
path, side, r, rate = sys.argv[1:]
d = json.load(open(path))
for s in d["sections"]:
    try:
        res = s["data"]["results"][0]
        st = res["steps"][0]
    except (KeyError, IndexError, TypeError):
        continue
    run = st["run"]
    held = res.get("highest_rate_within_1s", 0) >= float(rate)
    print("\t".join(map(str, [side, r, round(run["accepted_rate"]), round(run["p99_s"] * 1000, 1),
        round(run["http_p99_s"] * 1000, 1), round(st["postgres_cpu_per_event_s"] * 1e6),
        round(st["dev_cpu_per_event_s"] * 1e6), held])))
PY
    tail -1 "$results"
  done
done
python3 - "$results" "$rate" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print(f"\nmedians at {int(sys.argv[2]):,}/s")
print("side\truns\taccepted/s\tinbox p99 ms\tHTTP p99 ms\tPG CPU µs/event\tdev CPU µs/event\theld")
for side in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == side]
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    print(f"{side}\t{len(rs)}\t{med(2):,.0f}\t{med(3):.1f}\t{med(4):.1f}\t{med(5):.0f}\t{med(6):.0f}\t{sum(r[7] == 'True' for r in rs)}/{len(rs)}")
PY
