package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Bucket records are binary (they are written on the hot path's flush):
//
//	version byte (1), varint Refilled, uvarint count, then per limit
//	lp(name), varint Capacity, Amount, Period, Tokens, Rem
//
// Everything else is JSON through the types below, so that renaming a
// field in package model never changes the file format.
const recordVersion = 1

var errCorrupt = errors.New("corrupt bucket record")

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r *store.Record) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendVarint(dst, r.Refilled)
	dst = binary.AppendUvarint(dst, uint64(len(r.Limits)))
	for i := range r.Limits {
		l := &r.Limits[i]
		dst = appendLP(dst, l.Name)
		for _, v := range [...]int64{l.Params.Capacity, l.Params.Amount, l.Params.Period, l.State.Tokens, l.State.Rem} {
			dst = binary.AppendVarint(dst, v)
		}
	}
	return dst
}

// decodeRecord decodes what appendRecord wrote.
func decodeRecord(b []byte) (*store.Record, error) {
	d := decoder{b: b}
	if d.byte() != recordVersion {
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

type limitJSON struct {
	Name     string        `json:"name"`
	Kind     uint8         `json:"kind,omitempty"`
	Capacity int64         `json:"capacity"`
	Amount   int64         `json:"refill_amount,omitempty"`
	Period   time.Duration `json:"refill_period_ns,omitempty"`
}

type configJSON struct {
	Limits        []limitJSON `json:"limits"`
	OnUnavailable string      `json:"on_unavailable,omitempty"`
}

func encodeConfig(c model.Config) ([]byte, error) {
	out := configJSON{Limits: make([]limitJSON, len(c.Limits)), OnUnavailable: string(c.OnUnavailable)}
	for i, l := range c.Limits {
		out.Limits[i] = limitJSON{Name: l.Name, Kind: uint8(l.Kind), Capacity: l.Capacity, Amount: l.RefillAmount, Period: l.RefillPeriod}
	}
	return json.Marshal(out)
}

func decodeConfig(b []byte) (*model.Config, error) {
	var in configJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	c := &model.Config{Limits: make([]model.Limit, len(in.Limits)), OnUnavailable: model.OnUnavailable(in.OnUnavailable)}
	for i, l := range in.Limits {
		c.Limits[i] = model.Limit{Name: l.Name, Kind: model.Kind(l.Kind), Capacity: l.Capacity, RefillAmount: l.Amount, RefillPeriod: l.Period}
	}
	return c, nil
}

type entityJSON struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	ParentID  string            `json:"parent_id,omitempty"`
	Cascade   bool              `json:"cascade,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

func encodeEntity(e model.Entity) ([]byte, error) {
	return json.Marshal(entityJSON(e))
}

func decodeEntity(b []byte) (model.Entity, error) {
	var in entityJSON
	err := json.Unmarshal(b, &in)
	return model.Entity(in), err
}

type eventJSON struct {
	ID        string            `json:"id"`
	Time      time.Time         `json:"time"`
	Action    string            `json:"action"`
	Entity    string            `json:"entity,omitempty"`
	Resource  string            `json:"resource,omitempty"`
	Principal string            `json:"principal,omitempty"`
	Details   map[string]string `json:"details,omitempty"`
}

func encodeEvent(ev model.AuditEvent) ([]byte, error) {
	return json.Marshal(eventJSON(ev))
}

func decodeEvent(b []byte) (model.AuditEvent, error) {
	var in eventJSON
	err := json.Unmarshal(b, &in)
	return model.AuditEvent(in), err
}

type namespaceJSON struct {
	Name      string    `json:"name"`
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	DeletedAt time.Time `json:"deleted_at"`
}

func encodeNamespace(n model.Namespace) ([]byte, error) {
	return json.Marshal(namespaceJSON(n))
}

func decodeNamespace(b []byte) (model.Namespace, error) {
	var in namespaceJSON
	err := json.Unmarshal(b, &in)
	return model.Namespace(in), err
}
