#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 or Ubuntu 24.04, each step timed (docs/fresh-box.md):
# a minimal debootstrap (no kernel headers, no bcc, no Python venv, no gdsdiag), entered with chroot
# inside a private mount namespace (its /proc, /sys, /dev, debugfs and tracefs are mounts of that
# namespace only; the host is not changed). The kernel is the host's, so its headers tree is what a
# fresh VM of this kernel lacks.
#   sudo bash benchmarks/fresh_box.sh ROOT [--tests] [bookworm|noble]
# --tests also runs the README's test command there (the whole suite: minutes). The release is
# bookworm (Debian 12) unless named; noble (Ubuntu 24.04) is bootstrapped from archive.ubuntu.com
# with the apt sources a fresh Ubuntu 24.04 image has (main restricted universe multiverse, -updates,
# -security: debootstrap writes 'main' only, and python3-bpfcc is in universe).
set -euo pipefail
root=${1:?usage: fresh_box.sh ROOT [--tests] [bookworm|noble]}
tests=${2:-}
release=${3:-bookworm}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$root/bin/bash" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  t0=$SECONDS
  case $release in
    bookworm) timeout 1200 debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null ;;
    noble)
      # Debian 12's debootstrap has no noble script: Ubuntu's releases since gutsy share that one.
      # The keyring is Ubuntu's (ubuntu-keyring from Ubuntu's own pool, its 2018 archive key
      # F6EC B376 2474 EDA9 D21B 7022 8719 20D1 991B C93C, the key Ubuntu publishes): Debian 12
      # does not package it.
      kr=$(mktemp -d)
      timeout 120 curl -sfo "$kr/k.deb" \
        https://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb
      dpkg-deb -x "$kr/k.deb" "$kr/x"
      gpg --show-keys --with-colons "$kr/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" 2>/dev/null \
        | grep -q ':F6ECB3762474EDA9D21B7022871920D1991BC93C:' \
        || { echo "fresh_box.sh: the Ubuntu keyring lacks the 2018 archive key" >&2; exit 2; }
      timeout 1200 debootstrap --variant=minbase --keyring="$kr/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" \
        noble "$root" http://archive.ubuntu.com/ubuntu /usr/share/debootstrap/scripts/gutsy >/dev/null
      rm -rf "$kr"
      cat >"$root/etc/apt/sources.list" <<EOF
deb http://archive.ubuntu.com/ubuntu noble main restricted universe multiverse
deb http://archive.ubuntu.com/ubuntu noble-updates main restricted universe multiverse
deb http://security.ubuntu.com/ubuntu noble-security main restricted universe multiverse
EOF
      ;;
    *) echo "fresh_box.sh: release $release: bookworm or noble" >&2; exit 4 ;;
  esac
  echo "== debootstrap $release minbase: $((SECONDS - t0)) s"
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

# The chroot's / is bound onto itself first: a VM's / is a mount point, and the tests that make a
# private mount namespace (unshare --propagation private) or look a path up in the mount table need
# one (a bare chroot directory is neither: those tests failed or skipped for the chroot's sake).
inside=$(cat <<EOF
set -e
mount --bind "$root" "$root"
mount --bind /proc "$root/proc"; mount --rbind /sys "$root/sys"; mount --rbind /dev "$root/dev"
mountpoint -q "$root/sys/kernel/tracing" || mount -t tracefs nodev "$root/sys/kernel/tracing" 2>/dev/null || true
mountpoint -q "$root/sys/kernel/debug" || mount -t debugfs nodev "$root/sys/kernel/debug" 2>/dev/null || true
for d in /opt/wheels /opt/pypi /opt/pypi-more; do [ -d \$d ] && mkdir -p "$root\$d" && mount --bind -o ro \$d "$root\$d"; done
run() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive PIP_CERT=/etc/ssl/host-ca.crt bash -c "cd /root/gdsdiag && \$1"; }
echo "== \$(. $root/etc/os-release; echo \$PRETTY_NAME), kernel \$(uname -r)"
t=\$SECONDS; rc=0; run '$setup' >"$root/root/setup.log" 2>&1 || rc=\$?
echo "== README set-up: rc \$rc, \$((SECONDS - t)) s"
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
