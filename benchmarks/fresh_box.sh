#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12, each step timed (docs/fresh-box.md): a minimal
# debootstrap of bookworm (no kernel headers, no bcc, no gdsdiag), entered with chroot inside a
# private mount namespace (its /proc, /sys, /dev and tracefs are mounts of that namespace only; the
# host is not changed). The kernel is the host's, so its headers tree is what a fresh VM of this
# kernel lacks.
#   sudo bash benchmarks/fresh_box.sh /var/tmp/fresh-deb12 [--tests]
# --tests also runs the README's test command there (the whole suite: minutes).
set -euo pipefail
root=${1:?usage: fresh_box.sh ROOT [--tests]}
tests=${2:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$root/bin/bash" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  t0=$SECONDS
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  echo "== debootstrap bookworm minbase: $((SECONDS - t0)) s"
fi
readme_line() { grep -m1 "^    $1" "$repo/README.md" | sed 's/^    //'; }
setup=$(readme_line 'apt-get update && apt-get install -y python3-venv python3-bpfcc')
test_cmd=$(readme_line 'apt-get update && apt-get install -y python3-venv && bash tests/run.sh')
rm -rf "$root/root/gdsdiag" && mkdir -p "$root/root/gdsdiag"
git -C "$repo" archive HEAD | tar -x -C "$root/root/gdsdiag"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Where this machine reaches PyPI through a proxy whose CA is in its bundle, or reads local wheel
# directories (its pip.conf), the chroot's pip does the same (apt's ca-certificates would rebuild the
# chroot's bundle without that CA, so it gets a copy of its own)
mkdir -p "$root/etc/ssl" && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca.crt"
[ -f ~/.config/pip/pip.conf ] && mkdir -p "$root/root/.config/pip" && cp ~/.config/pip/pip.conf "$root/root/.config/pip/"

inside=$(cat <<EOF
set -e
mount --bind /proc "$root/proc"; mount --rbind /sys "$root/sys"; mount --rbind /dev "$root/dev"
mount -t tracefs nodev "$root/sys/kernel/tracing" 2>/dev/null || true
for d in /opt/wheels /opt/pypi /opt/pypi-more; do [ -d \$d ] && mkdir -p "$root\$d" && mount --bind -o ro \$d "$root\$d"; done
run() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive PIP_CERT=/etc/ssl/host-ca.crt bash -c "cd /root/gdsdiag && \$1"; }
t=\$SECONDS; run '$setup' >"$root/root/setup.log" 2>&1; echo "== README set-up: rc 0, \$((SECONDS - t)) s"
grep -a 'kernel headers for' "$root/root/setup.log" || echo "(a headers tree was there)"
t=\$SECONDS; run 'gdsdiag trace --json -- cp /etc/os-release /tmp/os-release.copy >/root/trace.out 2>/root/trace.err'
echo "== gdsdiag trace --json -- cp /etc/os-release /tmp/os-release.copy: \$((SECONDS - t)) s, stdout \$(wc -l <"$root/root/trace.out") JSON lines"
run 'python3 -c "import json,sys; [json.loads(x) for x in open(\"/root/trace.out\")]"'
if [ "$tests" = --tests ]; then
  t=\$SECONDS; rc=0; run '$test_cmd' >"$root/root/test.log" 2>&1 || rc=\$?
  echo "== README test command: rc \$rc, \$((SECONDS - t)) s"; grep -aE '^[0-9]+ (passed|failed)|skipped' "$root/root/test.log" | tail -4
fi
EOF
)
unshare -m --propagation private bash -c "$inside"
