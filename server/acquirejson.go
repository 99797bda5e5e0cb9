package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// POST /v1/acquire is the hot path of the server, and encoding/json was
// the largest part of the handler's own work: 57% of its time (decoding
// 43%, encoding 14%) and 25 of its 41 allocations, in
// BenchmarkAcquireCommitHandler. The request and response
// are therefore read and written by hand here, for the shapes clients
// send, with encoding/json as the reference: parseAcquireRequest accepts
// only input whose meaning it is sure of and declines everything else
// (escapes, nulls, floats, unusual keys, duplicates), which then goes
// through decode as before; appendAcquireResponse writes the bytes
// json.Encoder would. FuzzAcquireRequestJSON and FuzzAcquireResponseJSON
// hold both to encoding/json.

// maxFastBody is the largest acquire body read whole and parsed by hand;
// larger ones (32 limits with long names come close) go through decode.
const maxFastBody = 4 << 10

// bodyBufs holds buffers of maxFastBody+1 bytes for acquire bodies.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, maxFastBody+1); return &b }}

// decodeAcquire reads an acquire body as decode does, with the same
// answers, but parses the common case by hand: a body of a known length up
// to maxFastBody bytes that parseAcquireRequest accepts.
func decodeAcquire(w http.ResponseWriter, r *http.Request, req *api.AcquireRequest) error {
	if r.ContentLength <= 0 || r.ContentLength > maxFastBody {
		return decodeCopy(w, r, req)
	}
	buf := bodyBufs.Get().(*[]byte)
	defer bodyBufs.Put(buf)
	// One byte more than declared tells a body that ends where it says
	// from one that does not (possible only in-process, not over HTTP).
	data, err := readSome(r.Body, (*buf)[:r.ContentLength+1])
	if err == io.EOF && parseAcquireRequest(data, req) {
		return nil
	}
	// decode sees the same stream it would have read: the bytes read
	// here, then the rest of the body or the error that ended the read.
	// (This path has no limit of its own to enforce: http.MaxBytesReader
	// in decode counts from the body's first byte, as it always did.)
	rest := r.Body
	if err != nil {
		rest = io.NopCloser(errReader{err})
	}
	r.Body = replayedBody{Reader: io.MultiReader(bytes.NewReader(bytes.Clone(data)), rest), Closer: r.Body}
	return decodeCopy(w, r, req)
}

// decodeCopy is decode into req through a copy, which alone goes to the
// heap (encoding/json takes an interface), so that the caller's request
// can stay on its stack when the fast path takes it.
func decodeCopy(w http.ResponseWriter, r *http.Request, req *api.AcquireRequest) error {
	v := new(api.AcquireRequest)
	err := decode(w, r, v)
	*req = *v
	return err
}

// readSome reads from rd until buf is full or a read fails, and returns
// what it read with that failure (io.EOF when the body ended).
func readSome(rd io.Reader, buf []byte) ([]byte, error) {
	n := 0
	for n < len(buf) {
		m, err := rd.Read(buf[n:])
		n += m
		if err != nil {
			return buf[:n], err
		}
	}
	return buf, nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// replayedBody is a request body some of which was read already.
type replayedBody struct {
	io.Reader
	io.Closer
}

// parseAcquireRequest parses data, a whole body, into req when it can be
// sure encoding/json (strict, as decode uses it) would read the same: one
// object of the request's fields, spelt exactly, each at most once, with
// strings free of escapes and control characters and in valid UTF-8,
// integers of at most 18 digits without a leading zero, consume an object
// of integers with distinct keys, and limits an array of strings. It
// reports false, leaving req in an unspecified state, for anything else.
func parseAcquireRequest(data []byte, req *api.AcquireRequest) bool {
	*req = api.AcquireRequest{}
	p := jsonParser{data: data}
	if !p.consume('{') {
		return false
	}
	var seen uint8
	if !p.consume('}') {
		for {
			key, ok := p.plainString()
			if !ok || !p.consume(':') {
				return false
			}
			var field uint8
			switch string(key) {
			case "entity":
				field, ok = 1<<0, p.stringValue(&req.Entity)
			case "resource":
				field, ok = 1<<1, p.stringValue(&req.Resource)
			case "consume":
				field, ok = 1<<2, p.consumeValue(&req.Consume)
			case "limits":
				field, ok = 1<<3, p.stringsValue(&req.Limits)
			case "commit":
				field, ok = 1<<4, p.boolValue(&req.Commit)
			case "lease_ttl_ms":
				field, ok = 1<<5, p.intValue(&req.LeaseTTLMS)
			case "on_unavailable":
				field, ok = 1<<6, p.stringValue(&req.OnUnavailable)
			}
			if !ok || field == 0 || seen&field != 0 {
				return false
			}
			seen |= field
			if p.consume('}') {
				break
			}
			if !p.consume(',') {
				return false
			}
		}
	}
	p.space()
	return p.i == len(p.data)
}

// jsonParser reads the subset of JSON parseAcquireRequest accepts.
type jsonParser struct {
	data []byte
	i    int
}

// space skips JSON whitespace.
func (p *jsonParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips whitespace and c, reporting whether c was next.
func (p *jsonParser) consume(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plainString reads a string with no escapes or control characters, in
// valid UTF-8 (which encoding/json takes byte for byte), and returns its
// contents, which alias data.
func (p *jsonParser) plainString() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start, ascii := p.i, true
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := p.data[start:p.i]
			p.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < ' ':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return nil, false
}

func (p *jsonParser) stringValue(out *string) bool {
	s, ok := p.plainString()
	*out = string(s)
	return ok
}

// stringsValue reads an array of plain strings; [] is an empty slice, not
// nil, as encoding/json makes it.
func (p *jsonParser) stringsValue(out *[]string) bool {
	if !p.consume('[') {
		return false
	}
	list := []string{}
	if !p.consume(']') {
		for {
			var s string
			if !p.stringValue(&s) {
				return false
			}
			list = append(list, s)
			if p.consume(']') {
				break
			}
			if !p.consume(',') {
				return false
			}
		}
	}
	*out = list
	return true
}

// consumeValue reads an object of integers with distinct keys (where
// encoding/json would let the last of equal keys win); {} is an empty map.
func (p *jsonParser) consumeValue(out *map[string]int64) bool {
	if !p.consume('{') {
		return false
	}
	m := make(map[string]int64, 1)
	if !p.consume('}') {
		for {
			key, ok := p.plainString()
			if !ok || !p.consume(':') {
				return false
			}
			if _, dup := m[string(key)]; dup {
				return false
			}
			var n int64
			if !p.intValue(&n) {
				return false
			}
			m[string(key)] = n
			if p.consume('}') {
				break
			}
			if !p.consume(',') {
				return false
			}
		}
	}
	*out = m
	return true
}

// intValue reads an integer of 1 to 18 digits without a leading zero, so
// it fits an int64, optionally negative (but not -0).
func (p *jsonParser) intValue(out *int64) bool {
	p.space()
	neg := p.i < len(p.data) && p.data[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		n = n*10 + int64(p.data[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (p.data[start] == '0' && (digits > 1 || neg)) {
		return false
	}
	if neg {
		n = -n
	}
	*out = n
	return true
}

func (p *jsonParser) boolValue(out *bool) bool {
	p.space()
	switch rest := p.data[p.i:]; {
	case bytes.HasPrefix(rest, []byte("true")):
		*out = true
		p.i += len("true")
	case bytes.HasPrefix(rest, []byte("false")):
		*out = false
		p.i += len("false")
	default:
		return false
	}
	return true
}

// respBufs holds the scratch space of acquire responses.
var respBufs = sync.Pool{New: func() any {
	return &respBuf{body: make([]byte, 0, 512), limits: make([]api.LimitStatus, 0, 4), opts: make([]tollgate.AcquireOption, 0, 8)}
}}

// respBuf is the scratch space of one acquire response.
type respBuf struct {
	body   []byte
	limits []api.LimitStatus        // never nil: an acquire's limits are [], not null
	opts   []tollgate.AcquireOption // an acquire has at most 5 (handlers.go)
}

func getRespBuf() *respBuf { return respBufs.Get().(*respBuf) }

// maxPooledResp bounds the buffers kept for reuse (the largest responses,
// 32 limits on 4 levels, take about 25 KiB).
const maxPooledResp = 8 << 10

func putRespBuf(b *respBuf) {
	if cap(b.body) > maxPooledResp || cap(b.limits) > 32 {
		return
	}
	clear(b.limits[:cap(b.limits)]) // drop the strings of the last response
	clear(b.opts[:cap(b.opts)])     // and the options (an idempotency key, limits)
	respBufs.Put(b)
}

// appendStatuses is api.FromStatuses into out.
func appendStatuses(out []api.LimitStatus, ss []model.Status) []api.LimitStatus {
	for _, s := range ss {
		out = append(out, api.FromStatus(s))
	}
	return out
}

// writeAcquireResponse is writeJSON(w, http.StatusOK, resp), without the
// reflection: the same headers, status and bytes, in one Write as well.
func writeAcquireResponse(w http.ResponseWriter, resp *api.AcquireResponse, buf *respBuf) {
	buf.body = appendAcquireResponse(buf.body[:0], resp)
	setJSONHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.body)
}

// appendAcquireResponse appends what json.Encoder writes for resp, the
// newline after it included.
func appendAcquireResponse(b []byte, resp *api.AcquireResponse) []byte {
	b = append(b, '{')
	if resp.LeaseID != "" {
		b = append(b, `"lease_id":`...)
		b = appendJSONString(b, resp.LeaseID)
		b = append(b, ',')
	}
	b = append(b, `"consumed":`...)
	b = appendConsumed(b, resp.Consumed)
	b = append(b, `,"limits":`...)
	if resp.Limits == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range resp.Limits {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLimitStatus(b, &resp.Limits[i])
		}
		b = append(b, ']')
	}
	if resp.Degraded {
		b = append(b, `,"degraded":true`...)
	}
	if resp.ExpiresMS != 0 {
		b = append(b, `,"expires_at_ms":`...)
		b = strconv.AppendInt(b, resp.ExpiresMS, 10)
	}
	return append(b, "}\n"...)
}

// appendConsumed writes a map as encoding/json does: keys in byte order.
func appendConsumed(b []byte, m map[string]int64) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var keysBuf [8]string
	keys := keysBuf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, m[k], 10)
	}
	return append(b, '}')
}

func appendLimitStatus(b []byte, s *api.LimitStatus) []byte {
	b = append(b, `{"entity":`...)
	b = appendJSONString(b, s.Entity)
	b = append(b, `,"resource":`...)
	b = appendJSONString(b, s.Resource)
	b = append(b, `,"limit":`...)
	b = appendJSONString(b, s.Limit)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, s.Kind)
	b = append(b, `,"capacity":`...)
	b = strconv.AppendInt(b, s.Capacity, 10)
	b = append(b, `,"available":`...)
	b = strconv.AppendInt(b, s.Available, 10)
	b = append(b, `,"requested":`...)
	b = strconv.AppendInt(b, s.Requested, 10)
	b = append(b, `,"exceeded":`...)
	b = strconv.AppendBool(b, s.Exceeded)
	if s.Shadow {
		b = append(b, `,"shadow":true`...)
	}
	if s.Source != "" {
		b = append(b, `,"source":`...)
		b = appendJSONString(b, s.Source)
	}
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, s.RetryAfterMS, 10)
	if s.Waits != "" {
		b = append(b, `,"waits":`...)
		b = appendJSONString(b, s.Waits)
	}
	if s.ResetsAtMS != 0 {
		b = append(b, `,"resets_at_ms":`...)
		b = strconv.AppendInt(b, s.ResetsAtMS, 10)
	}
	if s.WindowMS != 0 {
		b = append(b, `,"window_ms":`...)
		b = strconv.AppendInt(b, s.WindowMS, 10)
	}
	return append(b, '}')
}

// appendJSONString quotes s as encoding/json does: strings of printable
// ASCII that needs no escape (what identifiers and limit names are) are
// copied; any other is left to encoding/json, HTML escaping included.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			q, _ := json.Marshal(s) // cannot fail for a string
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
