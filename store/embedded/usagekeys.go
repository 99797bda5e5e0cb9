package embedded

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The encoding of usage keys (see the layout in usage.go).

// checkUsageKey is UsageKey.Validate plus what this backend's keys need:
// names that fit in a bbolt key, and no '#', which separates a name from
// the start in keys and cursors (the contract's cursors assume it too; the
// limiter's identifiers never hold one). A listing seeks past a resource's
// snapshots by its name + "#", which a resource named with one could break.
func checkUsageKey(k store.UsageKey) error {
	if err := k.Validate(); err != nil {
		return err
	}
	switch {
	case len(k.Entity)+len(k.Resource) > maxUsageNames:
		return model.Invalid("entity", k.Entity+"/"+k.Resource, fmt.Sprintf("entity and resource longer than %d bytes together", maxUsageNames))
	case strings.Contains(k.Entity, "#"):
		return model.Invalid("entity", k.Entity, `must not contain "#"`)
	case strings.Contains(k.Resource, "#"):
		return model.Invalid("resource", k.Resource, `must not contain "#"`)
	}
	return nil
}

// appendStart appends a window start as the contract's cursors write it.
func appendStart(dst []byte, start int64) []byte {
	return fmt.Appendf(dst, "%020d", start)
}

// startLen is the length of appendStart's output for every int64.
const startLen = 20

// entityWindowPrefix starts the usage keys of an entity's snapshots of one
// window type.
func entityWindowPrefix(entity string, w store.Window) []byte {
	return appendLP(appendLP(nil, entity), string(w))
}

// resourceWindowPrefix starts the index keys of a resource's snapshots of
// one window type.
func resourceWindowPrefix(resource string, w store.Window) []byte {
	return appendLP(appendLP(nil, resource), string(w))
}

// usageKey is the key of a snapshot's record in usage.
func usageKey(k store.UsageKey) []byte {
	b := append(entityWindowPrefix(k.Entity, k.Window), k.Resource...)
	return appendStart(append(b, '#'), k.Start)
}

// byResKey is the key of a snapshot in usage-by-resource.
func byResKey(k store.UsageKey) []byte {
	b := appendStart(resourceWindowPrefix(k.Resource, k.Window), k.Start)
	return append(append(b, '#'), k.Entity...)
}

// expiryKey is the key of a snapshot in usage-expiry: expires big-endian
// with the sign bit flipped, so keys sort by expiry, then the usage key.
func expiryKey(expires int64, uk []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(uk)), uint64(expires)^1<<63)
	return append(b, uk...)
}

// splitExpiryKey decodes an expiryKey.
func splitExpiryKey(k []byte) (expires int64, uk []byte, ok bool) {
	if len(k) <= 8 {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(k) ^ 1<<63), k[8:], true
}

// parseStart decodes appendStart's output.
func parseStart(b []byte) (int64, bool) {
	if len(b) != startLen {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

// splitNameStart decodes name + "#" + start, the tail of a usage key.
func splitNameStart(b []byte) (string, int64, bool) {
	n := len(b) - startLen - 1
	if n < 1 || b[n] != '#' {
		return "", 0, false
	}
	start, ok := parseStart(b[n+1:])
	return string(b[:n]), start, ok
}

// splitStartName decodes start + "#" + name, the tail of an index key.
func splitStartName(b []byte) (int64, string, bool) {
	if len(b) < startLen+2 || b[startLen] != '#' {
		return 0, "", false
	}
	start, ok := parseStart(b[:startLen])
	return start, string(b[startLen+1:]), ok
}

// parseUsageKey decodes a usage key.
func parseUsageKey(b []byte) (store.UsageKey, bool) {
	d := decoder{b: b}
	entity, window := d.string(), d.string()
	if d.bad {
		return store.UsageKey{}, false
	}
	resource, start, ok := splitNameStart(d.b)
	return store.UsageKey{Entity: entity, Resource: resource, Window: store.Window(window), Start: start}, ok
}
