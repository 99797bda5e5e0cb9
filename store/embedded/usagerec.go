package embedded

import (
	"encoding/binary"
	"maps"
	"slices"

	"github.com/tollgate-rl/tollgate/store"
)

// usageRec is a stored snapshot. Its record is binary:
//
//	version byte (1), varint events, varint expires,
//	uvarint count, then per limit lp(name), varint consumed,
//	uvarint count, then per source lp(source), lp(last seq applied)
//
// with limits and sources sorted, so that equal snapshots encode equally.
type usageRec struct {
	consumed map[string]int64
	events   int64
	expires  int64
	applied  map[string]string // source -> last Seq applied
}

const usageRecordVersion = 1

// apply adds in to r unless r applied a Seq of in.Source at least as
// great already, and reports whether it did.
func (r *usageRec) apply(in *store.UsageIncrement) bool {
	if last, ok := r.applied[in.Source]; ok && in.Seq <= last {
		return false
	}
	r.applied[in.Source] = in.Seq
	for limit, n := range in.Consumed {
		r.consumed[limit] += n
	}
	r.events += in.Events
	r.expires = max(r.expires, in.Expires)
	return true
}

// appendUsageRec appends the encoding of r to dst.
func appendUsageRec(dst []byte, r *usageRec) []byte {
	dst = append(dst, usageRecordVersion)
	dst = binary.AppendVarint(dst, r.events)
	dst = binary.AppendVarint(dst, r.expires)
	dst = binary.AppendUvarint(dst, uint64(len(r.consumed)))
	for _, name := range slices.Sorted(maps.Keys(r.consumed)) {
		dst = binary.AppendVarint(appendLP(dst, name), r.consumed[name])
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.applied)))
	for _, src := range slices.Sorted(maps.Keys(r.applied)) {
		dst = appendLP(appendLP(dst, src), r.applied[src])
	}
	return dst
}

// decodeUsageRec decodes what appendUsageRec wrote.
func decodeUsageRec(b []byte) (*usageRec, error) {
	d := decoder{b: b}
	if d.byte() != usageRecordVersion {
		return nil, errCorruptUsage
	}
	r := &usageRec{events: d.varint(), expires: d.varint()}
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each limit takes more than a byte
		return nil, errCorruptUsage
	}
	r.consumed = make(map[string]int64, n)
	for range n {
		name := d.string()
		r.consumed[name] = d.varint()
	}
	n = d.uvarint()
	if n > uint64(len(d.b)) {
		return nil, errCorruptUsage
	}
	r.applied = make(map[string]string, n)
	for range n {
		src := d.string()
		r.applied[src] = d.string()
	}
	if d.bad || len(d.b) != 0 {
		return nil, errCorruptUsage
	}
	return r, nil
}
