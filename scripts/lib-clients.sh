# Shared by scripts/test-python.sh and scripts/test-typescript.sh (sourced):
# the README examples that run as written, and a tollgate serve to run them
# against.

# readme_examples FILE MARKER LANG prints, in order, every ```LANG block of
# FILE whose line before is MARKER (an HTML comment, invisible on the page),
# each followed by an empty line: the blocks that run as one script.
readme_examples() {
	awk -v marker="$2" -v fence='```'"$3" '
		marked && $0 == fence { inblock = 1; marked = 0; next }
		inblock && $0 == "```" { inblock = 0; print ""; next }
		inblock { print; next }
		{ marked = ($0 == marker) }
	' "$1"
}

# start_tollgate BIN LOG starts `BIN serve --store memory:` on a free
# loopback port, logging to LOG, and sets TOLLGATE_URL (its http://127.0.0.1:PORT)
# and TOLLGATE_PID once it listens (the port is the kernel's: --addr :0,
# read back from the log's "listening" line). Fails after 15 s.
start_tollgate() {
	# Emptied here, not only by the background job's redirection, which may
	# come after the first look below: a log reused from a server started
	# before would give that server's (dead) URL.
	: >"$2"
	"$1" serve --store memory: --addr 127.0.0.1:0 >"$2" 2>&1 &
	TOLLGATE_PID=$!
	local i
	for i in $(seq 300); do
		TOLLGATE_URL=$(grep -o 'msg=listening url=http://[0-9.:]*' "$2" | head -1 | sed 's/.*url=//' || true)
		[ -n "$TOLLGATE_URL" ] && return 0
		kill -0 "$TOLLGATE_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "tollgate serve did not start:" >&2
	cat "$2" >&2
	return 1
}
