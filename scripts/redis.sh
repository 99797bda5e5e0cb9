#!/usr/bin/env bash
# redis-server and redis-cli (Redis 7+) for tests and development, from
# Debian's package where they are not on PATH already. Valkey's
# valkey-server and valkey-cli do as well when Redis's are absent.
#
#   scripts/redis.sh install         make sure they are there, print the directory holding the server
#   scripts/redis.sh install-valkey  the same for Valkey's valkey-server and valkey-cli, so that the
#                                    backend's tests run against both: from PATH, or Debian's package
#                                    (bookworm: its backports) unpacked into .cache/valkey, no root needed
#   scripts/redis.sh run [PORT]      run a server in the foreground (default port 6379), nothing persisted
#
# install prints the directory on stdout (as scripts/dynamodb-local.sh
# prints its jar dir), for TOLLGATE_REDIS_DIR; everything else goes to
# stderr. A server and its CLI found side by side on PATH are used as they
# are. Else, as root (or with passwordless sudo) with apt-get, it runs
# `apt-get install -y redis-server` (Debian's package: Redis 7.0 on
# bookworm), after `apt-get update` only if that failed (no package lists
# yet), without starting the package's system service. Else, or if that
# fails, it prints nothing and says on stderr how to get a server, so that
# the Redis tests skip with instructions; unless CI is set (CI=true, as CI
# systems set it): then it fails.
set -euo pipefail

in_ci() {
	case "${CI:-}" in
	"" | false | False | FALSE | 0) return 1 ;;
	*) return 0 ;;
	esac
}

# version_of prints the version a server reports (redis-server --version:
# "Redis server v=7.0.15 sha=..."; Valkey's reads the same).
version_of() { "$1" --version 2>/dev/null | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p' || true; }

# find_dir prints the directory holding a Redis 7+ (or Valkey) server with
# its CLI beside it: the Go harness runs both from that one directory.
find_dir() {
	local pair server cli s d v
	for pair in "redis-server redis-cli" "valkey-server valkey-cli"; do
		read -r server cli <<<"$pair"
		s=$(command -v "$server" 2>/dev/null) || continue
		d=$(cd "$(dirname "$s")" && pwd -P) # /bin is /usr/bin on merged-/usr systems: print the real one
		[ -x "$d/$cli" ] || {
			echo "redis: $s found, but no $cli beside it" >&2
			continue
		}
		v=$(version_of "$d/$server")
		# A server that does not say its version is taken as it is.
		if [ -n "$v" ] && [ "${v%%.*}" -lt 7 ]; then
			echo "redis: $d/$server is version $v; the tests need 7 or later" >&2
			continue
		fi
		echo "$d"
		return 0
	done
	return 1
}

missing() {
	cat >&2 <<EOF
redis: $1.
The Redis tests need redis-server and redis-cli of Redis 7 or later (or
valkey-server and valkey-cli). To get them:
  Debian 12+ / Ubuntu 24.04+:  sudo apt-get install redis-server
                               (or, where Valkey is packaged: sudo apt-get install valkey-server)
  older Debian / Ubuntu:       their package is Redis 6: use Redis's own apt
                               repository (packages.redis.io) or Valkey
  macOS:                       brew install redis   (or: brew install valkey)
or point the tests at a server that is already running:
  export TOLLGATE_REDIS_URL=redis://127.0.0.1:6379
  export TOLLGATE_REDIS_CLUSTER_URL=redis+cluster://HOST:PORT,HOST:PORT,HOST:PORT   (a cluster)
EOF
	if in_ci; then
		echo "redis: CI is set, so this fails" >&2
		exit 1
	fi
	echo "redis: the tests that need a server will skip" >&2
	exit 0
}

# as_root runs a command as root: directly, or through sudo when that needs
# no password (nothing here may stop to ask for one).
as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	else
		sudo -n "$@"
	fi
}

can_root() {
	[ "$(id -u)" = 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }
}

# hold_services keeps the package's postinst from starting the system
# redis-server service (a daemon on 6379 nobody asked for): invoke-rc.d and
# deb-systemd-invoke both ask /usr/sbin/policy-rc.d first, and its exit
# status 101 means "not now". That is Debian's mechanism for exactly this
# (container images ship such a policy: one already there is left alone).
# Ours is removed when the script exits.
policy=/usr/sbin/policy-rc.d
hold_services() {
	[ -e "$policy" ] && return 0
	as_root sh -c "printf '#!/bin/sh\n# scripts/redis.sh: no service starts while it installs redis-server\nexit 101\n' >$policy && chmod 755 $policy"
	trap 'as_root rm -f "$policy"' EXIT
}

install() {
	if find_dir; then
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 || missing "no Redis 7+ server on PATH, and no apt-get to install one"
	can_root || missing "no Redis 7+ server on PATH, and installing one with apt-get needs root (or sudo without a password)"

	echo "redis: installing Debian's redis-server package" >&2
	hold_services
	apt_install() { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >&2; }
	if ! apt_install; then
		# Most likely no package lists yet (a fresh container): fetch them once.
		as_root apt-get update -q >&2 || true
		apt_install || missing "apt-get install redis-server failed"
	fi
	find_dir || missing "Debian's redis-server package installed, but no Redis 7+ server and CLI found on PATH"
}

# install_valkey prints a directory holding valkey-server and valkey-cli:
# theirs on PATH, or Debian's packages (the release's own, else its
# backports: Valkey 8 for bookworm) downloaded with apt-get into
# .cache/valkey and unpacked there with dpkg-deb, installing nothing in
# the system.
install_valkey() {
	local s root codename
	if s=$(command -v valkey-server 2>/dev/null) && [ -x "$(dirname "$s")/valkey-cli" ]; then
		(cd "$(dirname "$s")" && pwd -P)
		return 0
	fi
	root="$(pwd -P)/.cache/valkey"
	if [ -x "$root/usr/bin/valkey-server" ] && [ -x "$root/usr/bin/valkey-cli" ]; then
		echo "$root/usr/bin"
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 ||
		missing "no valkey-server on PATH, and no apt-get and dpkg-deb to fetch Debian's"
	codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
	mkdir -p "$root/apt/lists/partial" "$root/debs"
	echo "redis: fetching Debian's valkey-server into $root" >&2
	if ! (cd "$root/debs" && apt-get download -q valkey-server valkey-tools >&2 2>&1); then
		[ -n "$codename" ] || missing "Debian's valkey-server package is not in this system's sources"
		echo "deb http://deb.debian.org/debian $codename-backports main" >"$root/apt/sources.list"
		local opts=(-o "Dir::Etc::sourcelist=$root/apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$root/apt/lists")
		apt-get "${opts[@]}" update -q >&2 || missing "apt-get update of $codename-backports failed"
		(cd "$root/debs" && apt-get "${opts[@]}" download -q valkey-server valkey-tools >&2) ||
			missing "Debian's valkey-server package is neither in this system's sources nor in $codename-backports"
	fi
	for f in "$root"/debs/*.deb; do dpkg-deb -x "$f" "$root"; done
	[ -x "$root/usr/bin/valkey-server" ] || missing "Debian's valkey-server package unpacked, but no valkey-server in it"
	echo "$root/usr/bin"
}

case "${1:-}" in
install) install ;;
install-valkey) install_valkey ;;
run)
	d=$(install)
	[ -n "$d" ] || exit 1 # install said why
	port=${2:-6379}
	server=redis-server
	[ -x "$d/$server" ] || server=valkey-server
	echo "$server on redis://127.0.0.1:$port (nothing persisted; Ctrl-C stops it)" >&2
	exec "$d/$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no
	;;
*)
	echo "usage: $0 install | install-valkey | run [PORT]" >&2
	exit 2
	;;
esac
