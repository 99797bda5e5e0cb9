package redis_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// stallRelay relays TCP connections to a Redis server and, while hung,
// forwards nothing either way, the connections staying open: a server
// stopped with SIGSTOP, or a network that drops every packet.
type stallRelay struct {
	ln    net.Listener
	to    string
	gate  sync.RWMutex // held for writing while hung
	mu    sync.Mutex
	conns []net.Conn
}

func newStallRelay(t *testing.T, to string) *stallRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &stallRelay{ln: ln, to: to}
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *stallRelay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, up)
		r.mu.Unlock()
		go r.pipe(up, c)
		go r.pipe(c, up)
	}
}

// pipe copies src to dst, each chunk through the gate.
func (r *stallRelay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.gate.RLock()
			_, werr := dst.Write(buf[:n])
			r.gate.RUnlock()
			if werr != nil {
				err = werr
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			_ = src.Close()
			return
		}
	}
}

func (r *stallRelay) hang()   { r.gate.Lock() }
func (r *stallRelay) resume() { r.gate.Unlock() }

func (r *stallRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
}

// A hung Redis (issue 21 item 1, docs/semantics.md 8): every acquire is
// answered within the call timeout (twice it, with the change
// generation's read, bounded by half a second), the request's fail mode
// deciding: a degraded grant in mode allow, *UnavailableError in block
// and by default; when Redis answers again, normal grants at once; and
// never more grants than the limit admits (the writes the relay held
// land late: debited, never granted). The call's own deadline is not the
// caller's: the limiter tells them apart by the caller's context (as
// TestFaultCancelledContextIsNotDegraded shows) and keeps only the text
// of the store's, so that the error does not match
// context.DeadlineExceeded.
func TestHungServerAnswersWithinTheCallTimeout(t *testing.T) {
	if serverURL == "" {
		t.Skip("no redis-server")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	relay := newStallRelay(t, u.Host)
	const callTimeout = 300 * time.Millisecond
	// The generation is read at most once per refresh interval, for at
	// most half a second; the acquire's own store call after it.
	const bound = callTimeout + 500*time.Millisecond + 400*time.Millisecond // margin for a loaded machine
	via := *u
	via.Host = relay.ln.Addr().String()
	st := openStore(t, via.String(), redis.WithCallTimeout(callTimeout))
	adm := newAdmin(t)
	ns := newNamespace(t, adm)
	lim, err := tollgate.New(st, tollgate.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 6
	limits := tollgate.WithLimits(tollgate.PerHour("rph", capacity))
	entity := fmt.Sprintf("hang-%d", time.Now().UnixNano())
	ctx := context.Background()
	grants := 0
	acquire := func(mode tollgate.OnUnavailable) (*tollgate.Lease, time.Duration, error) {
		opts := []tollgate.AcquireOption{limits}
		if mode != "" {
			opts = append(opts, tollgate.WithOnUnavailable(mode))
		}
		start := time.Now()
		le, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"rph": 1}, opts...)
		took := time.Since(start)
		if err == nil && !le.Degraded() {
			grants++
		}
		return le, took, err
	}
	for range 2 {
		if le, _, err := acquire(tollgate.Block); err != nil || le.Degraded() {
			t.Fatalf("before the hang: %v, %v", le, err)
		}
	}

	relay.hang()
	for round := range 2 {
		for _, mode := range []tollgate.OnUnavailable{tollgate.Allow, tollgate.Block, ""} {
			le, took, err := acquire(mode)
			if took > bound {
				t.Errorf("hung, round %d, mode %q: answered after %v, want within %v", round, mode, took, bound)
			}
			var ue *tollgate.UnavailableError
			switch {
			case mode == tollgate.Allow && (err != nil || !le.Degraded()):
				t.Errorf("hung, mode allow: %v, %v; want a degraded grant", le, err)
			case mode != tollgate.Allow && !errors.As(err, &ue):
				t.Errorf("hung, mode %q: %v, %v; want *UnavailableError", mode, le, err)
			case mode != tollgate.Allow && errors.Is(err, context.DeadlineExceeded):
				t.Errorf("hung, mode %q: %v matches context.DeadlineExceeded, which callers take for their own deadline", mode, err)
			}
			t.Logf("hung, round %d, mode %q: answered in %v (%v)", round, mode, took, err)
		}
	}
	relay.resume()

	resumed := time.Now()
	for {
		le, took, err := acquire(tollgate.Block)
		if err == nil && !le.Degraded() {
			t.Logf("granted again %v after Redis answered again", time.Since(resumed))
			break
		}
		if took > bound || time.Since(resumed) > 3*time.Second {
			t.Fatalf("after the hang: %v, %v after %v; want a normal grant within 3 s", le, err, time.Since(resumed))
		}
	}
	for {
		_, _, err := acquire(tollgate.Block)
		if errors.Is(err, tollgate.ErrRateLimited) {
			break
		}
		if err != nil {
			t.Fatalf("after the hang: %v", err)
		}
	}
	if grants > capacity {
		t.Errorf("%d grants of a limit of %d: over-admission", grants, capacity)
	}
	t.Logf("%d grants of %d tokens (the rest debited by writes the hang held, answered too late)", grants, capacity)
}

// A concurrency slot's acquire held by a hung Redis past the call
// timeout reaches it once it answers again, and takes the slot for a
// lease nobody holds (docs/semantics.md 8): the limiter finds the record
// and rolls it back within seconds, not at the lease's expiry.
func TestAbandonedSlotComesBackAfterAHang(t *testing.T) {
	if serverURL == "" {
		t.Skip("no redis-server")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	relay := newStallRelay(t, u.Host)
	via := *u
	via.Host = relay.ln.Addr().String()
	st := openStore(t, via.String(), redis.WithCallTimeout(300*time.Millisecond))
	adm := newAdmin(t)
	ns := newNamespace(t, adm)
	abandoned := make(chan tollgate.Abandoned, 1)
	lim, err := tollgate.New(st, tollgate.WithNamespace(ns), tollgate.WithOnAbandon(func(a tollgate.Abandoned) { abandoned <- a }))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := tollgate.New(openStore(t, serverURL), tollgate.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	slot := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	one := tollgate.Consume{"slots": 1}
	if _, err := lim.AcquireAndCommit(ctx, "k", "db", one, slot); err != nil { // warm
		t.Fatal(err)
	}
	relay.hang()
	start := time.Now()
	_, err = lim.Acquire(ctx, "k", "db", one, slot)
	relay.resume()
	if err == nil {
		t.Fatal("Acquire through the hung relay answered no error")
	}
	select {
	case a := <-abandoned:
		if a.Outcome != tollgate.AbandonEnded {
			t.Fatalf("abandoned %+v, want ended", a)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("no abandonment reported within 45 s")
	}
	got, err := direct.Available(ctx, "k", "db", slot)
	if err != nil || got[0].Available != 1 {
		t.Fatalf("Available: %+v, %v; want the slot back", got, err)
	}
	t.Logf("the slot came back %v after the acquire began", time.Since(start).Round(time.Millisecond))
}
