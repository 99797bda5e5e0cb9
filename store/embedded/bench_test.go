package embedded

import (
	"context"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// BenchmarkEmbedded measures Consume of one limit on one bucket. Each group
// (serial: one goroutine; parallel: 16 goroutines on the 2-core machine, see
// benchParallelism) starts with the memory backend as its baseline, so that
// internal/benchratio prints ratios from the same run:
//
//   - baseline: the memory backend;
//   - embedded: this backend (in-memory hot path, background flush every
//     100ms; the flushes' mean duration is reported as flush-us);
//   - bolt-update: the alternative this backend does not take, one bbolt
//     transaction (read, Prepare, Debit, write, fsync) per Consume;
//   - bolt-batch: the same through bbolt's group commit (DB.Batch), which
//     gathers concurrent calls into one transaction, waiting up to
//     MaxBatchDelay (10ms) for company.
//
// go test -run '^$' -bench BenchmarkEmbedded -benchmem -count 5 ./store/embedded/ | go run ./internal/benchratio -baseline baseline
func BenchmarkEmbedded(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			b.Run("baseline", func(b *testing.B) { benchConsume(b, mode, memory.New()) })
			b.Run("embedded", func(b *testing.B) {
				var flushes, flushNs, pauseNs atomic.Int64
				s := benchStore(b, WithFlushObserver(func(fi FlushInfo) {
					flushes.Add(1)
					flushNs.Add(int64(fi.Duration))
					pauseNs.Add(int64(fi.Pause))
				}))
				benchConsume(b, mode, s)
				if n := flushes.Load(); n > 0 {
					b.ReportMetric(float64(flushNs.Load())/float64(n)/1e3, "flush-us")
					b.ReportMetric(float64(pauseNs.Load())/float64(n)/1e3, "pause-us")
				}
			})
			b.Run("bolt-update", func(b *testing.B) {
				s := benchStore(b)
				benchConsume(b, mode, boltConsumer{s.db, s.db.Update})
			})
			b.Run("bolt-batch", func(b *testing.B) {
				s := benchStore(b)
				benchConsume(b, mode, boltConsumer{s.db, s.db.Batch})
			})
		})
	}
}

// benchParallelism makes the parallel group run 8 goroutines per core:
// group commit needs concurrent callers to gather.
const benchParallelism = 8

// consumer is the part of store.Buckets the benchmark calls.
type consumer interface {
	Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error)
}

func benchStore(b *testing.B, opts ...Option) *Store {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// benchRequest debits 1 token from a bucket that never runs dry, at a
// fixed time (the clock is not what is measured).
func benchRequest() *store.ConsumeRequest {
	p := bucket.Params{Capacity: bucket.MaxTokens / 2, Amount: 1000, Period: 1000}
	return &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{
		Key:    store.BucketKey{Entity: "hot", Resource: "api"},
		Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: 1000}},
	}}}
}

func benchConsume(b *testing.B, mode string, c consumer) {
	ctx := context.Background()
	consume := func(req *store.ConsumeRequest) {
		if ok, err := c.Consume(ctx, "bench", req); !ok || err != nil {
			b.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	consume(benchRequest()) // create the bucket
	b.ReportAllocs()
	if mode == "serial" {
		req := benchRequest()
		for b.Loop() {
			consume(req)
		}
		return
	}
	b.SetParallelism(benchParallelism)
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest() // Consume writes Observed into it
		for pb.Next() {
			consume(req)
		}
	})
}

// boltConsumer applies each Consume in its own bbolt write transaction run
// by commit (DB.Update or DB.Batch), with the same record encoding and the
// same shared helpers as the backend: the write-through design measured
// against the in-memory one.
type boltConsumer struct {
	db     *bolt.DB
	commit func(func(*bolt.Tx) error) error
}

func (c boltConsumer) Consume(_ context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	var ok bool
	err := c.commit(func(tx *bolt.Tx) error {
		nsb, err := nsBucketForWrite(tx, ns)
		if err != nil {
			return err
		}
		bk := nsb.Bucket(bktBuckets)
		br := &req.Buckets[0]
		k := bucketKey(br.Key)
		rec := store.NewRecord(req.Now)
		if v := bk.Get(k); v != nil {
			if rec, err = decodeRecord(v); err != nil {
				return err
			}
		}
		// DB.Batch may run this function again after a failure, so it
		// must not depend on having run before: it derives ok afresh.
		ok = store.Prepare(rec, br, req.Now)
		if ok {
			store.Debit(rec, br)
		}
		return bk.Put(k, appendRecord(nil, rec))
	})
	return ok, err
}

// BenchmarkFlush measures one flush (snapshot, one bbolt transaction,
// fsync) after n buckets changed, and BenchmarkOpen opening a file of n
// buckets (every record is loaded into memory).
func BenchmarkFlush(b *testing.B) {
	for _, n := range []int{1, 1_000, 10_000} {
		b.Run("buckets-"+strconv.Itoa(n), func(b *testing.B) {
			s := benchStore(b, WithFlushInterval(time.Hour))
			reqs := manyRequests(n)
			for b.Loop() {
				for _, req := range reqs {
					req.Now++
					if ok, err := s.Consume(context.Background(), "bench", req); !ok || err != nil {
						b.Fatalf("Consume = %v, %v", ok, err)
					}
				}
				if err := s.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := Open(path, WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	for _, req := range manyRequests(n) {
		if ok, err := s.Consume(context.Background(), "bench", req); !ok || err != nil {
			b.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("buckets-"+strconv.Itoa(n), func(b *testing.B) {
		for b.Loop() {
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// manyRequests returns requests on n distinct buckets.
func manyRequests(n int) []*store.ConsumeRequest {
	reqs := make([]*store.ConsumeRequest, n)
	for i := range reqs {
		reqs[i] = benchRequest()
		reqs[i].Buckets[0].Key.Entity = "key-" + strconv.Itoa(i)
	}
	return reqs
}
