#!/usr/bin/env bash
# Renders the HTML report of a recording in headless Chromium and saves a
# screenshot, to look at the charts by eye.
#
#   report/testdata/screenshot.sh                 # records a 20 s `latscope demo --record` session first
#   report/testdata/screenshot.sh session.zst     # or reports on a recording you have
#
# Environment: OUT (output folder, default a new one under /tmp), HEIGHT
# (the window's height in pixels, default 2400; the page is about 4000 tall),
# DURATION (the demo's length, default 20s).
# Needs Go and Chromium (Debian: apt-get install -y chromium). Chromium runs
# with networking off; the page needs none.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$(mktemp -d /tmp/latscope-report.XXXXXX)}
mkdir -p "$out"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
	echo "screenshot.sh: chromium is not installed (Debian: apt-get install -y chromium)" >&2
	exit 1
fi

(cd "$root" && go build -o "$out/latscope" ./cmd/latscope)

recording=${1:-}
if [[ -z $recording ]]; then
	if ! "$out/latscope" demo --help | grep -q -- '--record'; then
		echo "screenshot.sh: this latscope's demo cannot record yet; pass a recording: $0 FILE" >&2
		exit 1
	fi
	recording=$out/demo.zst
	echo "recording a ${DURATION:-20s} demo session to $recording"
	"$out/latscope" demo --duration "${DURATION:-20s}" --record "$recording" >/dev/null
fi

"$out/latscope" report "$recording" -o "$out/report.html"
"$out/latscope" report "$recording" -o "$out/report.md"

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
	--disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
	--screenshot="$out/report.png" --window-size="1200,${HEIGHT:-2400}" "file://$out/report.html" 2>/dev/null

echo "report:     $out/report.html"
echo "markdown:   $out/report.md"
echo "screenshot: $out/report.png"
