package embedded

import (
	"encoding/binary"
	"errors"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/store"
)

// Bucket records are binary (they are written on the hot path's flush):
//
//	version byte (1), varint Refilled, uvarint count, then per limit
//	lp(name), varint Capacity, Amount, Period, Tokens, Rem
//
// or, when a limit is a calendar quota, version 2, whose limits end with
// lp(window) ("" for none, else as calendar.Window.String writes it).
// Records without quotas stay version 1, which every release reads.
//
// Everything else is JSON (package codec), so that renaming a field in
// package model never changes the file format.
const (
	recordVersion        = 1
	recordVersionWindows = 2
)

var errCorrupt = errors.New("corrupt bucket record")

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r *store.Record) []byte {
	version := byte(recordVersion)
	for i := range r.Limits {
		if !r.Limits[i].Params.Window.IsZero() {
			version = recordVersionWindows
		}
	}
	dst = append(dst, version)
	dst = binary.AppendVarint(dst, r.Refilled)
	dst = binary.AppendUvarint(dst, uint64(len(r.Limits)))
	for i := range r.Limits {
		l := &r.Limits[i]
		dst = appendLP(dst, l.Name)
		for _, v := range [...]int64{l.Params.Capacity, l.Params.Amount, l.Params.Period, l.State.Tokens, l.State.Rem} {
			dst = binary.AppendVarint(dst, v)
		}
		if version == recordVersionWindows {
			dst = appendLP(dst, l.Params.Window.String())
		}
	}
	return dst
}

// decodeRecord decodes what appendRecord wrote.
func decodeRecord(b []byte) (*store.Record, error) {
	d := decoder{b: b}
	version := d.byte()
	if version != recordVersion && version != recordVersionWindows {
		return nil, errCorrupt
	}
	r := &store.Record{Refilled: d.varint()}
	n := d.uvarint()
	if n > uint64(len(b)) { // each limit takes more than a byte
		return nil, errCorrupt
	}
	r.Limits = make([]store.LimitState, n)
	for i := range r.Limits {
		l := &r.Limits[i]
		l.Name = d.string()
		l.Params = bucket.Params{Capacity: d.varint(), Amount: d.varint(), Period: d.varint()}
		l.State = bucket.State{Tokens: d.varint(), Rem: d.varint()}
		if version == recordVersionWindows {
			if w := d.string(); w != "" {
				var err error
				if l.Params.Window, err = calendar.Parse(w); err != nil {
					return nil, errCorrupt
				}
			}
		}
	}
	if d.bad || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return r, nil
}

// decoder reads varints from b; a short or malformed input sets bad and
// yields zeros from then on.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) byte() byte {
	if d.bad || len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if d.bad || n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if d.bad || n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
