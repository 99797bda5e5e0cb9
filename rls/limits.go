package rls

import (
	"math"
	"net"
	"runtime"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bounds what a gRPC server of the Service accepts from its clients:
// how many connections, how long a connection may stay without calls, how
// many calls run at once on one, how often a client may ping, and how large
// a call may be. Without them a peer that sends the HTTP/2 preface and then
// nothing holds its connection for hours.
//
// A zero or negative field leaves gRPC's own default, which for most
// fields is no limit; DefaultLimits holds the values tollgate serve uses.
// Use ServerOptions for the server and Listener for its listener:
//
//	lim := rls.DefaultLimits()
//	gs := grpc.NewServer(lim.ServerOptions()...)
//	svc.Register(gs)
//	err := gs.Serve(lim.Listener(ln))
type Limits struct {
	// MaxConnections caps the connections open at once. Beyond it new
	// connections wait in the kernel's accept queue until one closes (the
	// listener stops accepting; nothing is refused). Zero: no cap.
	MaxConnections int

	// MaxConcurrentStreams caps the calls in flight on one connection,
	// advertised as SETTINGS_MAX_CONCURRENT_STREAMS; a stream beyond it is
	// reset with REFUSED_STREAM. Envoy then opens another connection, and
	// a gRPC client queues the call. Zero: no cap.
	MaxConcurrentStreams uint32

	// HandshakeTimeout bounds the time from accepting a connection to
	// reading the client's HTTP/2 preface and first SETTINGS frame; a peer
	// that is slower is disconnected. Zero: gRPC's 120 s.
	HandshakeTimeout time.Duration

	// IdleTimeout closes a connection that has had no call in flight for
	// this long: a GOAWAY, then the close a second or so later (5 s if
	// the client does not answer). Pings do not count as calls. Zero:
	// never.
	IdleTimeout time.Duration

	// MaxConnectionAge closes a connection this long (±10%) after it was
	// opened, gracefully: calls in flight get MaxConnectionAgeGrace to
	// finish. It spreads the clients of a load-balanced address over the
	// servers behind it again. Zero: never.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration

	// KeepaliveTime and KeepaliveTimeout detect dead peers: after
	// KeepaliveTime without reading anything from a connection the server
	// pings it, and closes it if nothing arrives within KeepaliveTimeout.
	// gRPC raises a KeepaliveTime below 1 s to 1 s. Zero: gRPC's 2 h and
	// 20 s.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration

	// MinPingInterval is the shortest interval between a client's pings
	// that the server accepts, with or without calls in flight. A client
	// that pings more often is sent GOAWAY ENHANCE_YOUR_CALM
	// ("too_many_pings") and disconnected at the third such ping (gRPC
	// forgets the count when it sends a response). Zero: gRPC's 5 min.
	MinPingInterval time.Duration

	// MaxRecvMsgSize is the largest request message, in bytes; a larger
	// one fails with codes.ResourceExhausted before it is read. Zero:
	// gRPC's 4 MiB.
	MaxRecvMsgSize int

	// MaxHeaderListSize is the largest header list of a call, uncompressed
	// (HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE). Zero: gRPC's 16 MiB.
	MaxHeaderListSize uint32

	// StreamWindow and ConnWindow are the HTTP/2 flow-control windows
	// the server grants each call and each connection for request data,
	// in bytes. Set, they stay fixed. Without them gRPC estimates the
	// bandwidth-delay product: it sends a PING after the data of nearly
	// every call and grows the windows from the answers, one more frame
	// each way per call for a service whose requests are a few hundred
	// bytes (a client's data beyond a window waits for the server to
	// read, as always). gRPC ignores values below 64 KiB. Zero: gRPC's
	// estimate.
	StreamWindow int32
	ConnWindow   int32

	// StreamWorkers is how many goroutines the server keeps to run calls
	// (grpc.NumStreamWorkers). A call that finds them all busy runs on a
	// goroutine of its own, as every call does without them, so it bounds
	// nothing: it saves CPU. A fresh goroutine per call grows its stack
	// on every call (runtime.newstack was about 15% of the service's CPU
	// in the Envoy benchmark; a worker keeps its grown stack). Zero: a
	// goroutine per call.
	StreamWorkers int
}

// DefaultLimits returns the limits of tollgate serve's gRPC port. Envoy
// keeps a few connections to its rate-limit service (one per worker
// thread) and calls it on every request, so the defaults leave a steady
// client alone and bound everything else:
//
//   - MaxConnections 1024: Envoy's own default cap on connections to a
//     cluster, per Envoy; a replica rarely sees more than a few hundred.
//   - MaxConcurrentStreams 250: Go's HTTP/2 server default; Envoy opens
//     another connection when one is full.
//   - HandshakeTimeout 5 s: the preface and SETTINGS are two small frames
//     sent at once; the same bound as the HTTP API's header timeout.
//   - IdleTimeout 5 min: only a quiet Envoy worker's connection idles, and
//     it reconnects on its next call.
//   - MaxConnectionAge: none (MaxConnectionAgeGrace 30 s once set).
//   - KeepaliveTime 1 min, KeepaliveTimeout 20 s: a vanished peer's
//     connection is closed within about 80 s; a busy one is never pinged.
//   - MinPingInterval 5 s: well below any sensible keepalive interval of
//     Envoy (connection_keepalive) or of a gRPC client (at least 10 s).
//   - MaxRecvMsgSize 1 MiB: requests are small, but descriptor values
//     come from request headers (Envoy allows 60 KiB of them by default),
//     and a request the service refuses is let through by Envoy's default
//     failure_mode_deny: false, so the cap stays well above what a client
//     can make Envoy send.
//   - MaxHeaderListSize 16 KiB: the HTTP API's bound; Envoy sends a few
//     headers of its own.
//   - StreamWindow 1 MiB, ConnWindow 4 MiB: a request of MaxRecvMsgSize
//     never waits for a window update, four at once on a connection do
//     not either, and gRPC sends no PING per call to estimate windows.
//   - StreamWorkers: one per processor (runtime.GOMAXPROCS), gRPC's own
//     advice; more calls at once still run, each on a goroutine of its
//     own.
func DefaultLimits() Limits {
	return Limits{
		MaxConnections:        1024,
		MaxConcurrentStreams:  250,
		HandshakeTimeout:      5 * time.Second,
		IdleTimeout:           5 * time.Minute,
		MaxConnectionAgeGrace: 30 * time.Second,
		KeepaliveTime:         time.Minute,
		KeepaliveTimeout:      20 * time.Second,
		MinPingInterval:       5 * time.Second,
		MaxRecvMsgSize:        1 << 20,
		MaxHeaderListSize:     16 << 10,
		StreamWindow:          1 << 20,
		ConnWindow:            4 << 20,
		StreamWorkers:         runtime.GOMAXPROCS(0),
	}
}

// ServerOptions returns the gRPC server options that apply l (all but
// MaxConnections, which is Listener's).
//
// Pings are allowed without calls in flight (PermitWithoutStream): Envoy's
// connection_keepalive pings on a schedule whether or not calls are in
// flight, and refusing them would disconnect every quiet Envoy with
// ENHANCE_YOUR_CALM. A connection kept alive by pings alone still closes
// after IdleTimeout, and MinPingInterval still bounds the pings.
func (l Limits) ServerOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if l.MaxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(l.MaxConcurrentStreams))
	}
	// gRPC times a zero or negative ConnectionTimeout out at once: leave
	// its default instead.
	if l.HandshakeTimeout > 0 {
		opts = append(opts, grpc.ConnectionTimeout(l.HandshakeTimeout))
	}
	if l.MaxRecvMsgSize > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(l.MaxRecvMsgSize))
	}
	if l.MaxHeaderListSize > 0 {
		opts = append(opts, grpc.MaxHeaderListSize(l.MaxHeaderListSize))
	}
	if l.StreamWindow > 0 {
		opts = append(opts, grpc.InitialWindowSize(l.StreamWindow))
	}
	if l.ConnWindow > 0 {
		opts = append(opts, grpc.InitialConnWindowSize(l.ConnWindow))
	}
	if l.StreamWorkers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(min(l.StreamWorkers, math.MaxUint32))))
	}
	// In keepalive's structs a zero field is gRPC's default.
	opts = append(opts,
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     positive(l.IdleTimeout),
			MaxConnectionAge:      positive(l.MaxConnectionAge),
			MaxConnectionAgeGrace: positive(l.MaxConnectionAgeGrace),
			Time:                  positive(l.KeepaliveTime),
			Timeout:               positive(l.KeepaliveTimeout),
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             positive(l.MinPingInterval),
			PermitWithoutStream: true,
		}),
	)
	return opts
}

// Listener returns ln accepting at most MaxConnections connections at once
// (golang.org/x/net/netutil.LimitListener), or ln itself without a cap.
// Closing the returned listener closes ln.
//
// gRPC sets TCP_USER_TIMEOUT only on a bare *net.TCPConn, which a limited
// listener's connections are not; the server's keepalive pings
// (KeepaliveTime, KeepaliveTimeout) find a dead peer instead.
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConnections <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, l.MaxConnections)
}

// positive returns d, or 0 (gRPC's default) for a negative d.
func positive(d time.Duration) time.Duration { return max(d, 0) }
