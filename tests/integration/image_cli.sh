# evalbox image import|ls|rm and gc --images, as a user types them: progress on stderr, the
# same image from two transports stored once, Ctrl-C mid-import keeps no partial layer, gc
# empties the store, doctor reports it, an image's device nodes are skipped and it still runs.
source "$(dirname "$0")/lib.sh"
BB=$("$SRC/tests/images/make-images" busybox)
DEB=$("$SRC/tests/images/make-images" debian)
layers="$EVALBOX_STATE_DIR/images/layers"

"$EVALBOX" image import "oci:$BB/oci" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "import"; }
grep -q "layer 1/2" "$WORK/err" || fail "no per-layer progress on stderr: $(cat "$WORK/err")"
grep -q "2 unpacked now" "$WORK/out" || fail "first import: $(cat "$WORK/out")"
id=$(awk '{print $2}' "$WORK/out" | sed 's/:$//')
case "$id" in sha256:*) ;; *) fail "no image id in: $(cat "$WORK/out")" ;; esac

# The same image as a docker-archive: same id, nothing unpacked again.
"$EVALBOX" image import -q "docker-archive:$BB/busybox.docker.tar" >"$WORK/out2" || fail "docker-archive import"
grep -q "$id" "$WORK/out2" || fail "docker-archive gave another id: $(cat "$WORK/out2")"
grep -q "0 unpacked now, 2 already present" "$WORK/out2" || fail "re-unpacked: $(cat "$WORK/out2")"

"$EVALBOX" image ls --json >"$WORK/ls.json"
python3 - "$WORK/ls.json" "$id" <<'PY' || fail "image ls --json"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema"] == "evalbox.image-list.v1", doc
assert [i["id"] for i in doc["images"]] == [sys.argv[2]], doc
assert len(doc["images"][0]["layers"]) == 2 and len(doc["images"][0]["references"]) == 2, doc
PY
"$EVALBOX" image ls | grep -q "${id:7:12}" || fail "image ls table"

set +e
"$EVALBOX" image rm sha256:0000000000000000 >/dev/null 2>"$WORK/rm.err"; rc=$?
"$EVALBOX" image import "oci:$WORK/nowhere" >/dev/null 2>"$WORK/bad.err"; bad=$?
set -e
[ "$rc" = 1 ] || fail "rm of an unknown image: exit $rc"
[ "$bad" != 0 ] && grep -q "oci:$WORK/nowhere" "$WORK/bad.err" || fail "a missing image: exit $bad, $(cat "$WORK/bad.err")"

# Ctrl-C while the Debian layer unpacks: exit 130, no layer and no temporary left.
"$EVALBOX" image import "oci:$DEB/oci-gzip" >/dev/null 2>"$WORK/int.err" &
pid=$!
for _ in $(seq 1 400); do grep -q unpacking "$WORK/int.err" && break; sleep 0.02; done
grep -q unpacking "$WORK/int.err" || fail "the Debian import never started unpacking"
sleep 0.3
kill -INT "$pid"
set +e
wait "$pid"; rc=$?
set -e
[ "$rc" = 130 ] || fail "interrupted import: exit $rc ($(cat "$WORK/int.err"))"
[ "$(find "$layers" -mindepth 1 -maxdepth 1 -name '.*' | wc -l)" = 0 ] || fail "a partial layer was left: $(ls -a "$layers")"
[ "$(find "$layers" -mindepth 1 -maxdepth 1 | wc -l)" = 2 ] || fail "layers: $(ls -a "$layers")"

"$EVALBOX" doctor >"$WORK/doctor" || true
grep -q "image store $EVALBOX_STATE_DIR/images: 1 image(s)" "$WORK/doctor" || fail "doctor: $(grep image "$WORK/doctor")"
grep -q "image_whiteouts" "$WORK/doctor" || fail "doctor does not report the whiteout form"

"$EVALBOX" image rm "oci:$BB/oci" | grep -q "removed $id" || fail "rm by reference"
"$EVALBOX" image import -q "oci:$BB/oci" >/dev/null
"$EVALBOX" gc --images --max-size 0 >"$WORK/gc" || fail "gc --images: $(cat "$WORK/gc")"
grep -q "images: 1 image(s) and 2 layer(s) removed" "$WORK/gc" || fail "gc: $(cat "$WORK/gc")"
[ "$(find "$layers" -mindepth 1 -maxdepth 1 | wc -l)" = 0 ] || fail "gc left: $(ls -a "$layers")"

# The Debian image carries the device nodes mmdebstrap puts in /dev (console, full, null, ptmx,
# random, tty, urandom, zero): skipped and counted, none created, and the image runs with the
# sandbox's own /dev.
"$EVALBOX" image import "oci:$DEB/oci" >"$WORK/deb" 2>"$WORK/deb.err" || { cat "$WORK/deb.err" >&2; fail "Debian import"; }
grep -qx "skipped 8 device node(s) (the sandbox provides /dev)" "$WORK/deb" || fail "device nodes: $(cat "$WORK/deb")"
[ -z "$(find "$layers" \( -type c -o -type b \) -print -quit)" ] || fail "a device node was created: $(find "$layers" -type c -o -type b)"
"$EVALBOX" image import -q --json "oci:$DEB/oci" >"$WORK/deb.json"
python3 - "$WORK/deb.json" <<'PY' || fail "the image record's devices_skipped: $(cat "$WORK/deb.json")"
import json, sys
layers = json.load(open(sys.argv[1]))["layers"]
assert [l["devices_skipped"] for l in layers] == [8], layers
PY
need_isolation
"$EVALBOX" sandbox exec --image "oci:$DEB/oci" -- \
  sh -c 'test -c /dev/null && echo x >/dev/null && head -c 4 /dev/zero | wc -c && python3 -c "print(6 * 7)"' \
  >"$WORK/deb.run" 2>"$WORK/deb.run.err" || { cat "$WORK/deb.run.err" >&2; fail "running the Debian image"; }
[ "$(cat "$WORK/deb.run")" = "$(printf '4\n42')" ] || fail "the Debian image's run: $(cat "$WORK/deb.run")"
echo "image CLI: ok"
