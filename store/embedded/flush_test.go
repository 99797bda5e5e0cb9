package embedded

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/calendar"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// White-box tests of the flush: they look at what a flush transaction
// writes and inject failures into it.

const t0 int64 = 1_700_000_000_000

// withBeforeCommit runs f at the end of every flush transaction.
func withBeforeCommit(f func(tx *bolt.Tx) error) Option {
	return func(o *options) { o.beforeCommit = f }
}

// openTest opens a store in a fresh file that flushes only when told to.
func openTest(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	s, err := Open(path, append([]Option{WithFlushInterval(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

var rps = bucket.Params{Capacity: 10_000, Amount: 10_000, Period: 1_000} // full again 1s after use

func key(entity string) store.BucketKey { return store.BucketKey{Entity: entity, Resource: "api"} }

// request debits amount from each entity's bucket, all or nothing.
func request(now, amount int64, entities ...string) *store.ConsumeRequest {
	req := &store.ConsumeRequest{Now: now}
	for _, e := range entities {
		req.Buckets = append(req.Buckets, store.BucketRequest{Key: key(e), Limits: []store.LimitRequest{{Name: "rps", Params: rps, Check: true, Amount: amount}}})
	}
	return req
}

func mustConsume(t *testing.T, s *Store, req *store.ConsumeRequest) {
	t.Helper()
	if ok, err := s.Consume(t.Context(), "ns", req); !ok || err != nil {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
}

// onDisk returns the record of entity's bucket in tx, nil if there is none.
func onDisk(t *testing.T, tx *bolt.Tx, entity string) *store.Record {
	t.Helper()
	v := sub(nsBucket(tx, "ns"), bktBuckets).Get(bucketKey(key(entity)))
	if v == nil {
		return nil
	}
	r, err := decodeRecord(v)
	if err != nil {
		t.Fatalf("%s: %v", entity, err)
	}
	return r
}

func tokens(r *store.Record) int64 {
	if r == nil {
		return -1
	}
	return r.Limits[0].State.Tokens
}

// Every flush writes a consistent cut: while cascades key-a -> org and
// key-b -> org run from many goroutines, every flush transaction holds org
// debited exactly as much as key-a and key-b together.
func TestFlushWritesWholeCascades(t *testing.T) {
	huge := bucket.Params{Capacity: 1 << 50, Amount: 1, Period: 1 << 40}
	var flushes, torn atomic.Int64
	var tornMsg atomic.Value
	consumedIn := func(r *store.Record) int64 {
		if r == nil {
			return 0
		}
		return huge.Capacity - r.Limits[0].State.Tokens
	}
	s, _ := openTest(t, withBeforeCommit(func(tx *bolt.Tx) error {
		flushes.Add(1)
		a, b, org := consumedIn(onDisk(t, tx, "key-a")), consumedIn(onDisk(t, tx, "key-b")), consumedIn(onDisk(t, tx, "org"))
		if org != a+b {
			torn.Add(1)
			tornMsg.Store("org " + strconv.FormatInt(org, 10) + ", keys " + strconv.FormatInt(a, 10) + " + " + strconv.FormatInt(b, 10))
		}
		return nil
	}))
	cascade := func(child string) *store.ConsumeRequest {
		req := &store.ConsumeRequest{Now: t0}
		for _, e := range []string{child, "org"} {
			req.Buckets = append(req.Buckets, store.BucketRequest{Key: key(e), Limits: []store.LimitRequest{{Name: "rps", Params: huge, Check: true, Amount: 1000}}})
		}
		return req
	}
	const workers, perWorker = 8, 5_000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			child := []string{"key-a", "key-b"}[w%2]
			for range perWorker {
				if ok, err := s.Consume(t.Context(), "ns", cascade(child)); !ok || err != nil {
					t.Errorf("Consume = %v, %v", ok, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d flushes during %d cascades", flushes.Load(), workers*perWorker)
	if n := torn.Load(); n > 0 {
		t.Errorf("%d flushes wrote a partial cascade, e.g. %v", n, tornMsg.Load())
	}
	if flushes.Load() < 2 {
		t.Errorf("only %d flushes ran during the cascades", flushes.Load())
	}
}

// A failed flush loses nothing: its changes are written by the next one,
// with the state they have by then, deletions of forgotten buckets included.
func TestFailedFlushIsRetried(t *testing.T) {
	fail := true
	var infos []FlushInfo
	var disk map[string]int64 // tokens of each bucket in the last flush transaction
	s, path := openTest(t,
		withBeforeCommit(func(tx *bolt.Tx) error {
			disk = map[string]int64{}
			for _, e := range []string{"idle", "busy"} {
				disk[e] = tokens(onDisk(t, tx, e))
			}
			if fail {
				return errors.New("injected")
			}
			return nil
		}),
		WithFlushObserver(func(fi FlushInfo) { infos = append(infos, fi) }))
	ctx := t.Context()
	mustConsume(t, s, request(t0, 4_000, "idle"))
	mustConsume(t, s, request(t0, 1_000, "busy"))
	fail = false
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Ten seconds later idle is full again: forget it. busy is used again.
	mustConsume(t, s, request(t0+10_000, 3_000, "busy"))
	s.forget(t, t0+10_000, "idle")
	fail = true
	if err := s.Flush(ctx); err == nil {
		t.Fatal("Flush with an injected failure succeeded")
	}
	mustConsume(t, s, request(t0+10_000, 2_000, "busy")) // between the failure and the retry
	fail = false
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"idle": -1, "busy": 5_000}; disk["idle"] != want["idle"] || disk["busy"] != want["busy"] {
		t.Errorf("retry wrote %v, want %v (-1: deleted)", disk, want)
	}
	if len(infos) != 3 || infos[1].Err == nil || infos[2].Err != nil || infos[2].Written != 2 || infos[2].Deleted != 1 {
		t.Errorf("observer saw %+v, want success, failure, then success writing 2 (busy, filler) and deleting 1", infos)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	recs, err := s2.ReadBuckets(ctx, "ns", []store.BucketKey{key("idle"), key("busy")})
	if err != nil || recs[0] != nil || tokens(recs[1]) != 5_000 {
		t.Errorf("after restart: idle %+v, busy %+v, %v; want none and 5000", recs[0], recs[1], err)
	}
}

// forget changes one more bucket (filler), then makes the bucket table
// sweep at now, as each shard does once it has created enough buckets.
func (s *Store) forget(t *testing.T, now int64, entity string) {
	t.Helper()
	mustConsume(t, s, request(now, 1_000, "filler"))
	s.buckets.Sweep(now)
	if s.buckets.Read("ns", []store.BucketKey{key(entity)})[0] != nil {
		t.Fatalf("%s was not forgotten", entity)
	}
}

// A record survives encoding exactly, and every truncation or corruption of
// one is refused, never decoded into a wrong bucket.
func TestRecordCodec(t *testing.T) {
	r := &store.Record{Refilled: t0, Limits: []store.LimitState{
		{Name: "rpm", Params: rps, State: bucket.State{Tokens: -12_345, Rem: 999}},
		{Name: "inflight", Params: bucket.Params{Capacity: bucket.MaxTokens}, State: bucket.State{Tokens: bucket.MaxTokens}},
	}}
	b := appendRecord(nil, r)
	got, err := decodeRecord(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("decode(encode(r)) = %+v, %v; want %+v", got, err, r)
	}
	for n := range len(b) {
		if got, err := decodeRecord(b[:n]); err == nil {
			t.Errorf("the first %d of %d bytes decoded to %+v", n, len(b), got)
		}
	}
	if _, err := decodeRecord(append(b, 0)); err == nil {
		t.Error("a record with a trailing byte decoded")
	}
	if b[0] != recordVersion {
		t.Errorf("a record without quotas is version %d, want %d (what every release reads)", b[0], recordVersion)
	}
	if _, err := decodeRecord(append([]byte{2}, b[1:]...)); err == nil {
		t.Error("a record of version 1 decoded as version 2")
	}
	if _, err := decodeRecord(append([]byte{3}, b[1:]...)); err == nil {
		t.Error("a record of version 3 decoded")
	}

	// A calendar quota's window is kept (version 2); an unknown one is
	// corrupt.
	quota := bucket.Params{Capacity: 3000, Amount: 3000, Period: 1, Window: calendar.Window{Unit: calendar.Month, Zone: "Europe/Berlin"}}
	r.Limits = append(r.Limits, store.LimitState{Name: "tok", Params: quota, State: bucket.State{Tokens: -7}})
	b = appendRecord(nil, r)
	if got, err := decodeRecord(b); err != nil || !reflect.DeepEqual(got, r) || b[0] != recordVersionWindows {
		t.Fatalf("with a quota: decode(encode(r)) = %+v, %v (version %d); want %+v", got, err, b[0], r)
	}
	for n := range len(b) {
		if got, err := decodeRecord(b[:n]); err == nil {
			t.Errorf("the first %d of %d bytes of a record with a quota decoded to %+v", n, len(b), got)
		}
	}
	bad := bytes.Replace(b, []byte("Europe/Berlin"), []byte("Europe/Bxrlin"), 1)
	if _, err := decodeRecord(bad); err == nil {
		t.Error("a record naming an unknown zone decoded")
	}
}
