package ddblocal

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listens reports whether process pid holds the socket listening on TCP
// port: the inodes of listening sockets on that port (/proc/net/tcp, tcp6)
// against the process's open files.
func listens(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(table, port, inodes); err != nil {
			return false, err
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, nil // gone: the caller sees it exit
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes adds to inodes those of the sockets in LISTEN state (0A)
// on port, from a /proc/net/tcp-format table.
func listeningInodes(table string, port int, inodes map[string]bool) error {
	f, err := os.Open(table)
	if os.IsNotExist(err) {
		return nil // no IPv6, for one
	}
	if err != nil {
		return fmt.Errorf("ddblocal: %w", err)
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], want) || fields[3] != "0A" {
			continue
		}
		if _, err := strconv.ParseUint(fields[9], 10, 64); err == nil {
			inodes[fields[9]] = true
		}
	}
	return sc.Err()
}
