// Package faultproxy is a proxy for tests that stands between a DynamoDB
// client and DynamoDB Local and fails the way DynamoDB, and the network on
// the way to it, fail: slow, stalled, closing or resetting connections,
// throttling, or answering 5xx. The fault is switched while requests flow
// (Proxy.Set), so a test drives a limiter or a server under load through a
// fault and back (docs/operations.md, "Faults").
//
// It listens on loopback and speaks HTTP/1.1 to its clients (DynamoDB's
// API is JSON over HTTP POST), so that it can answer errors as DynamoDB
// does; each request is forwarded to the upstream whole. The mode in force
// when a request has arrived decides what happens to it:
//
//   - Pass: forwarded, and its answer returned.
//   - Delay(d): forwarded at once, its answer held for d: the write lands,
//     the answer is late, and a client that gave up meanwhile never learns
//     that it landed.
//   - Hang: held, neither forwarded nor answered, its connection left open,
//     as by a stalled server whose kernel still takes connections (a
//     process under SIGSTOP). When the mode changes, the requests held are
//     handled under the new one: under Pass they are forwarded, even those
//     whose client has gone, as a resumed process reads what waited in its
//     sockets.
//   - Drop: the connection is closed without an answer; nothing forwarded.
//   - Reset: the connection is reset (TCP RST); nothing forwarded.
//   - Throttle, ProvisionedThroughput: 400 with DynamoDB's
//     ThrottlingException or ProvisionedThroughputExceededException body;
//     nothing forwarded.
//   - InternalError, Unavailable: 500 InternalServerError or 503
//     ServiceUnavailable; nothing forwarded.
//
// A connection to a dead server (connection refused) needs no proxy: close
// the proxy, or point the client at a port where nothing listens.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// kind is what a mode does with a request.
type kind uint8

const (
	kindPass kind = iota
	kindDelay
	kindHang
	kindDrop
	kindReset
	kindAnswer // an error answer of the proxy's own
)

// A Mode is what the proxy does with the requests that arrive while it is
// in force. Modes are comparable.
type Mode struct {
	kind   kind
	delay  time.Duration // kindDelay
	status int           // kindAnswer: the HTTP status
	typ    string        // kindAnswer: DynamoDB's __type
	msg    string        // kindAnswer: the message
}

// The modes. A Delay is made with Delay.
var (
	Pass  = Mode{kind: kindPass}
	Hang  = Mode{kind: kindHang}
	Drop  = Mode{kind: kindDrop}
	Reset = Mode{kind: kindReset}
	// Throttle answers 400 ThrottlingException, as DynamoDB does when
	// requests come faster than the account or the table allow.
	Throttle = Mode{kind: kindAnswer, status: http.StatusBadRequest,
		typ: "com.amazon.coral.availability#ThrottlingException", msg: "Rate of requests exceeds the allowed throughput."}
	// ProvisionedThroughput answers 400
	// ProvisionedThroughputExceededException, as DynamoDB does when a
	// partition or a provisioned table runs out of capacity.
	ProvisionedThroughput = Mode{kind: kindAnswer, status: http.StatusBadRequest,
		typ: "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
		msg: "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}
	// InternalError answers 500 InternalServerError.
	InternalError = Mode{kind: kindAnswer, status: http.StatusInternalServerError,
		typ: "com.amazonaws.dynamodb.v20120810#InternalServerError", msg: "Internal server error"}
	// Unavailable answers 503 ServiceUnavailable.
	Unavailable = Mode{kind: kindAnswer, status: http.StatusServiceUnavailable,
		typ: "com.amazon.coral.availability#ServiceUnavailableException", msg: "Service unavailable"}
)

// Delay returns the mode that forwards each request at once and holds its
// answer for d.
func Delay(d time.Duration) Mode { return Mode{kind: kindDelay, delay: d} }

// String names the mode: pass, delay-250ms, hang, drop, reset, or the
// status and error of an answer (400-ThrottlingException).
func (m Mode) String() string {
	switch m.kind {
	case kindPass:
		return "pass"
	case kindDelay:
		return "delay-" + m.delay.String()
	case kindHang:
		return "hang"
	case kindDrop:
		return "drop"
	case kindReset:
		return "reset"
	}
	typ := m.typ
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	return fmt.Sprintf("%d-%s", m.status, typ)
}

// Proxy is a running fault proxy. Its methods are safe for concurrent use.
type Proxy struct {
	upstream *url.URL
	ln       net.Listener
	srv      *http.Server
	fwd      *http.Transport

	mu      sync.Mutex
	mode    Mode
	changed chan struct{} // closed when the mode changes or the proxy closes
	closed  bool
	done    chan struct{} // closed when the proxy closes
	counts  map[string]int
	held    int
}

// Start starts a proxy on a free loopback port that forwards to upstream
// (a URL such as http://127.0.0.1:8000), in mode Pass.
func Start(upstream string) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q: want http://HOST:PORT", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	p := &Proxy{
		upstream: u, ln: ln, fwd: t,
		mode: Pass, changed: make(chan struct{}), done: make(chan struct{}),
		counts: map[string]int{},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		// Clients that give up close their connections; the errors of
		// those, and of hijacked ones, are expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL returns the proxy's address, the endpoint to give a client.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Set switches the proxy to m, for the requests that arrive from now on
// and for those held (Hang).
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == m {
		return
	}
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
}

// Mode returns the mode in force.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Held returns how many requests are held (Hang) at the moment.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Counts returns how many requests each mode has handled, by the mode's
// name (String). A request held and then released counts under Hang and
// again under the mode that released it.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Close stops the proxy: it closes the listener and every connection, and
// drops the requests held without forwarding them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.changed)
		close(p.done)
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.fwd.CloseIdleConnections()
	return err
}

// take returns the mode a request that arrives now meets and counts it,
// with the channel that is closed when it changes; ok is false once the
// proxy is closed.
func (p *Proxy) take() (m Mode, changed <-chan struct{}, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Mode{}, nil, false
	}
	p.counts[p.mode.String()]++
	return p.mode, p.changed, true
}

func (p *Proxy) addHeld(n int) {
	p.mu.Lock()
	p.held += n
	p.mu.Unlock()
}

// ServeHTTP handles one request under the mode in force once it has been
// read in full.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client has gone
	}
	for {
		m, changed, ok := p.take()
		if !ok {
			hijack(w, false)
			return
		}
		switch m.kind {
		case kindHang:
			p.addHeld(1)
			<-changed
			p.addHeld(-1)
			continue // handled under the new mode
		case kindDrop:
			hijack(w, false)
		case kindReset:
			hijack(w, true)
		case kindAnswer:
			answer(w, m)
		default:
			p.forward(w, r, body, m.delay)
		}
		return
	}
}

// forward sends the request upstream and returns its answer, delay after
// it came. The upstream request does not end with the client's: a request
// that reached the proxy reaches the store.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, body []byte, delay time.Duration) {
	out, err := http.NewRequestWithContext(context.Background(), r.Method, p.upstream.JoinPath(r.URL.Path).String(), bytes.NewReader(body))
	if err != nil {
		hijack(w, false)
		return
	}
	out.URL.RawQuery = r.URL.RawQuery
	out.Header = r.Header.Clone()
	out.Host = r.Host
	resp, err := p.fwd.RoundTrip(out)
	if err != nil {
		// The store cannot be reached: so it looks to the client.
		hijack(w, false)
		return
	}
	rb, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		hijack(w, false)
		return
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
			hijack(w, false)
			return
		}
	}
	for k, vs := range resp.Header {
		switch k {
		case "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length":
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rb)
}

// answer writes m's error as DynamoDB's JSON 1.0 protocol does.
func answer(w http.ResponseWriter, m Mode) {
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{m.typ, m.msg})
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", "faultproxy")
	w.WriteHeader(m.status)
	_, _ = w.Write(b)
}

// hijack closes the request's connection without an answer, with a TCP
// reset if rst.
func hijack(w http.ResponseWriter, rst bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		// Linger 0: close sends RST and drops what is unsent.
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
