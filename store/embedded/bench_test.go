package embedded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
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
// fsync) after n buckets changed.
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

// BenchmarkOpen measures opening a file of 100,000 buckets (every record
// is loaded into memory), alone and with 100,000 audit events beside them
// (which Open does not load: only its full check reads them). Each
// iteration opens the file without the full check, then runs the check on
// the open file, timing each: the medians are reported as open-ms and
// check-ms (what the check adds to Open, the default), their ratio as
// check/open, and the file's size as MiB. check-only is Check alone (which
// also decodes every bucket record, as Open's load does).
func BenchmarkOpen(b *testing.B) {
	const n = 100_000
	for _, audit := range []int{0, n} {
		path := openBenchFile(b, n, audit)
		name := "buckets-" + strconv.Itoa(n) + "+audit-" + strconv.Itoa(audit)
		b.Run(name, func(b *testing.B) {
			var opens, checks []time.Duration
			for b.Loop() {
				start := time.Now()
				s, err := Open(path, WithOpenCheck(false), WithFlushInterval(time.Hour))
				if err != nil {
					b.Fatal(err)
				}
				opened := time.Now()
				err = fullCheck(s.db, path)
				opens, checks = append(opens, opened.Sub(start)), append(checks, time.Since(opened))
				if err := errors.Join(err, s.Close()); err != nil {
					b.Fatal(err)
				}
			}
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2]) / float64(time.Millisecond)
			}
			o, c := median(opens), median(checks)
			b.ReportMetric(o, "open-ms")
			b.ReportMetric(c, "check-ms")
			b.ReportMetric(c/o, "check/open")
			if fi, err := os.Stat(path); err == nil {
				b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
			}
		})
		b.Run(name+"/check-only", func(b *testing.B) {
			for b.Loop() {
				if err := Check(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// openBenchFile writes a file of n buckets and audit audit events (written
// straight into the audit bucket: Open does not read them).
func openBenchFile(b *testing.B, n, audit int) string {
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
	if err := s.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		a := nsBucket(tx, "bench").Bucket(bktAudit)
		event := []byte(`{"id":"01JAAAAAAAAAAAAAAAAAAAAAAA","time":1700000000000,"action":"config.set","entity":"key-1","resource":"api","principal":"cli:ops@host","limits":[{"name":"rpm","capacity":100,"refill_amount":100,"refill_period":60000000000}]}`)
		for i := range audit {
			if err := a.Put(pairKey("key-"+strconv.Itoa(i%1000), strconv.Itoa(1_000_000+i)), event); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return path
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
