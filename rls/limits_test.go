package rls_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/rls"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// margin is how much later than its limit a server may act (a loaded
// machine, the race detector) before a test calls the limit missing.
const margin = 3 * time.Second

// startLimited is start with lim applied to the server.
func startLimited(t *testing.T, lim rls.Limits) *env {
	t.Helper()
	cfg, err := rls.ParseConfig([]byte(edgeConfig))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	e := &env{clk: clock.NewFake(epoch), store: &downStore{Store: memory.New()}, limiters: map[string]*tollgate.Limiter{}}
	e.serveLimited(t, rls.New(cfg, e.limiter), &lim)
	return e
}

// h2conn is a raw HTTP/2 client connection, for the peers a gRPC client
// would never be.
type h2conn struct {
	t     *testing.T
	conn  net.Conn
	fr    *http2.Framer
	start time.Time // before dialing
}

func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &h2conn{t: t, conn: conn, fr: http2.NewFramer(conn, conn), start: start}
}

// preface sends the client connection preface, and with settings the
// (empty) SETTINGS frame that completes it.
func (c *h2conn) preface(settings bool) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(http2.ClientPreface)); err != nil {
		c.t.Fatal(err)
	}
	if settings {
		if err := c.fr.WriteSettings(); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *h2conn) ping(data string) {
	c.t.Helper()
	var p [8]byte
	copy(p[:], data)
	if err := c.fr.WritePing(false, p); err != nil {
		c.t.Fatal(err)
	}
}

// openStream starts a ShouldRateLimit call on stream id and sends nothing
// more: the call stays in flight.
func (c *h2conn) openStream(id uint32) {
	c.t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", "rls"},
		{":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next frame, or the error that ended the connection.
// Running past deadline (from the dial) fails the test: the server left
// the connection open.
func (c *h2conn) read(deadline time.Duration) (http2.Frame, error) {
	c.t.Helper()
	if err := c.conn.SetReadDeadline(c.start.Add(deadline)); err != nil {
		c.t.Fatal(err)
	}
	f, err := c.fr.ReadFrame()
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("the connection is still open after %v", time.Since(c.start).Round(time.Millisecond))
	}
	return f, err
}

// untilClosed reads frames until the server closes the connection, which
// it must do within deadline, and returns the GOAWAY it sent (nil if
// none) and how long the connection was open. With ack it answers the
// server's pings, as a live peer does.
func (c *h2conn) untilClosed(deadline time.Duration, ack bool) (*http2.GoAwayFrame, time.Duration) {
	c.t.Helper()
	var goAway *http2.GoAwayFrame
	for {
		f, err := c.read(deadline)
		if err != nil {
			return goAway, time.Since(c.start)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = f
		case *http2.PingFrame:
			if ack && !f.IsAck() {
				_ = c.fr.WritePing(true, f.Data) // the server may have closed already
			}
		}
	}
}

// A connection that goes no further than the preface, or that never makes
// a call, or whose peer never answers, is closed once the limit for it
// passes, and not before.
func TestStalledConnectionsAreClosed(t *testing.T) {
	cases := []struct {
		name     string
		lim      rls.Limits
		settings bool          // send SETTINGS after the preface: the handshake completes
		ack      bool          // answer the server's pings
		after    time.Duration // the limit
		goAway   string        // want a GOAWAY (NO_ERROR) with this debug data
	}{
		{"preface only", rls.Limits{HandshakeTimeout: 300 * time.Millisecond}, false, true, 300 * time.Millisecond, ""},
		{"no call", rls.Limits{IdleTimeout: 300 * time.Millisecond}, true, true, 300 * time.Millisecond, "max_idle"},
		// gRPC pings at most once a second.
		{"silent peer", rls.Limits{KeepaliveTime: time.Second, KeepaliveTimeout: 300 * time.Millisecond}, true, false, 1300 * time.Millisecond, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := startLimited(t, c.lim)
			conn := dialH2(t, e.addr)
			conn.preface(c.settings)
			goAway, open := conn.untilClosed(c.after+margin, c.ack)
			if open < c.after {
				t.Errorf("closed after %v, before its limit of %v", open, c.after)
			}
			if c.goAway != "" && (goAway == nil || goAway.ErrCode != http2.ErrCodeNo || string(goAway.DebugData()) != c.goAway) {
				t.Errorf("GOAWAY %v, want NO_ERROR %q", goAway, c.goAway)
			}
		})
	}
}

// Streams beyond MaxConcurrentStreams are refused, the others stay open.
func TestStreamsBeyondTheLimitAreRefused(t *testing.T) {
	e := startLimited(t, rls.Limits{MaxConcurrentStreams: 2})
	conn := dialH2(t, e.addr)
	conn.preface(true)
	for _, id := range []uint32{1, 3, 5} {
		conn.openStream(id)
	}
	// The server handles frames in order: by the ack of this ping it has
	// answered the three streams.
	conn.ping("streams!")
	var maxStreams []uint32
	resets := map[uint32]http2.ErrCode{}
	for {
		f, err := conn.read(margin)
		if err != nil {
			t.Fatalf("connection closed: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && string(p.Data[:]) == "streams!" {
			break
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
				maxStreams = append(maxStreams, v)
			}
		case *http2.RSTStreamFrame:
			resets[f.StreamID] = f.ErrCode
		}
	}
	if len(maxStreams) != 1 || maxStreams[0] != 2 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %v, want [2]", maxStreams)
	}
	if len(resets) != 1 || resets[5] != http2.ErrCodeRefusedStream {
		t.Errorf("streams reset %v, want stream 5 refused (REFUSED_STREAM) and no other", resets)
	}
}

// A client that pings more often than MinPingInterval is disconnected with
// ENHANCE_YOUR_CALM; one that keeps to it is not, even with no call in
// flight (Envoy's connection_keepalive pings regardless).
func TestPingPolicy(t *testing.T) {
	cases := []struct {
		name     string
		interval time.Duration // MinPingInterval
		every    time.Duration // between the client's pings
		calm     bool          // want GOAWAY ENHANCE_YOUR_CALM
	}{
		{"too often", time.Hour, 0, true},
		{"spaced out, no call", 100 * time.Millisecond, 250 * time.Millisecond, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := startLimited(t, rls.Limits{MinPingInterval: c.interval})
			conn := dialH2(t, e.addr)
			conn.preface(true)
			// gRPC forgives two pings too early; the fourth is a third strike.
			const pings = 5
			var goAway *http2.GoAwayFrame
			for i := range pings {
				if i > 0 {
					time.Sleep(c.every) // paces the pings; synchronizes nothing
				}
				data := string(rune('0' + i))
				conn.ping(data)
				// Read up to the ack; a GOAWAY for this ping follows it.
				for acked := false; !acked && goAway == nil; {
					f, err := conn.read(c.every*pings + margin)
					if err != nil {
						break
					}
					switch f := f.(type) {
					case *http2.GoAwayFrame:
						goAway = f
					case *http2.PingFrame:
						acked = f.IsAck() && f.Data[0] == data[0]
					}
				}
				if goAway != nil {
					break
				}
			}
			if !c.calm {
				// Any GOAWAY for the last ping comes before the ack of this one.
				conn.ping("last")
				for goAway == nil {
					f, err := conn.read(c.every*pings + margin)
					if err != nil {
						t.Fatalf("connection closed: %v", err)
					}
					if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && string(p.Data[:4]) == "last" {
						break
					}
					goAway, _ = f.(*http2.GoAwayFrame)
				}
				if goAway != nil {
					t.Fatalf("GOAWAY %v %q for pings %v apart, want none (MinPingInterval %v)", goAway.ErrCode, goAway.DebugData(), c.every, c.interval)
				}
				return
			}
			if goAway == nil || goAway.ErrCode != http2.ErrCodeEnhanceYourCalm || string(goAway.DebugData()) != "too_many_pings" {
				t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM too_many_pings", goAway)
			}
			if _, open := conn.untilClosed(margin, false); open > margin {
				t.Errorf("closed after %v", open)
			}
		})
	}
}

// A request larger than MaxRecvMsgSize is refused before it is read.
func TestMaxRecvMsgSize(t *testing.T) {
	e := startLimited(t, rls.Limits{MaxRecvMsgSize: 4 << 10})
	if got := e.call(t, req("edge", 0, desc("api_key", strings.Repeat("k", 3<<10)))).OverallCode; got != pb.RateLimitResponse_OK {
		t.Errorf("a 3 KiB request: %v, want OK", got)
	}
	if got := e.callErr(t, req("edge", 0, desc("api_key", strings.Repeat("k", 5<<10)))); got != codes.ResourceExhausted {
		t.Errorf("a 5 KiB request: %v, want ResourceExhausted", got)
	}
}

// Beyond MaxConnections a connection waits to be accepted until another
// closes.
func TestMaxConnections(t *testing.T) {
	e := startLimited(t, rls.Limits{MaxConnections: 2})
	// e's gRPC client holds no connection: it connects on its first call.
	served := func(c *h2conn, within time.Duration) bool {
		t.Helper()
		if err := c.conn.SetReadDeadline(time.Now().Add(within)); err != nil {
			t.Fatal(err)
		}
		_, err := c.fr.ReadFrame() // gRPC's SETTINGS, sent once it accepts
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		if err != nil {
			t.Fatalf("connection closed: %v", err)
		}
		return true
	}
	a, b, c := dialH2(t, e.addr), dialH2(t, e.addr), dialH2(t, e.addr)
	for _, conn := range []*h2conn{a, b} {
		if !served(conn, margin) {
			t.Fatal("a connection within the limit is not served")
		}
	}
	// Only waiting can show that c is not served; a slow server would pass
	// this check wrongly, never fail it.
	if served(c, 300*time.Millisecond) {
		t.Fatal("a third connection is served, with MaxConnections 2")
	}
	_ = a.conn.Close()
	if !served(c, margin) {
		t.Fatal("the third connection is not served once another closed")
	}
}

// A gRPC client is not troubled by the limits: calls beyond the stream limit
// wait for a stream, and a connection closed for idling is replaced.
func TestClientUnderLimits(t *testing.T) {
	lim := rls.DefaultLimits()
	lim.MaxConcurrentStreams = 2
	lim.IdleTimeout = 300 * time.Millisecond
	e := startLimited(t, lim)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range cap(errs) {
		wg.Go(func() {
			_, err := e.client.ShouldRateLimit(context.Background(), req("edge", 0, desc("plan", "free")))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a call beyond the stream limit: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lim.IdleTimeout+margin)
	defer cancel()
	for st := e.conn.GetState(); st == connectivity.Ready; st = e.conn.GetState() {
		if !e.conn.WaitForStateChange(ctx, st) {
			t.Fatalf("the idle connection is still open after %v", lim.IdleTimeout+margin)
		}
	}
	if _, err := e.client.ShouldRateLimit(context.Background(), req("edge", 0, desc("plan", "free"))); err != nil {
		t.Fatalf("a call after the idle connection closed: %v", err)
	}
}

// StreamWorkers bounds nothing: with one worker, calls that all wait for
// each other still run at once (the ones the worker cannot take run on
// goroutines of their own), and DefaultLimits keeps one per processor.
func TestStreamWorkersBoundNothing(t *testing.T) {
	if w := rls.DefaultLimits().StreamWorkers; w < 1 {
		t.Errorf("DefaultLimits().StreamWorkers = %d, want at least 1", w)
	}
	cfg, err := rls.ParseConfig([]byte(edgeConfig))
	if err != nil {
		t.Fatal(err)
	}
	const calls = 4
	var arrived sync.WaitGroup
	arrived.Add(calls)
	e := &env{clk: clock.NewFake(epoch), store: &downStore{Store: memory.New()}, limiters: map[string]*tollgate.Limiter{}}
	// Each call waits in the limiter function until all have arrived: a
	// server that ran them one at a time would never answer.
	barrier := func(ctx context.Context, ns string) (*tollgate.Limiter, error) {
		arrived.Done()
		arrived.Wait()
		return e.limiter(ctx, ns)
	}
	lim := rls.DefaultLimits()
	lim.StreamWorkers = 1
	e.serveLimited(t, rls.New(cfg, barrier), &lim)
	ctx, cancel := context.WithTimeout(context.Background(), 5*margin)
	defer cancel()
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := e.client.ShouldRateLimit(ctx, req("edge", 0, desc("plan", "free")))
			errs <- err
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatalf("a call with one stream worker: %v", err)
		}
	}
}
