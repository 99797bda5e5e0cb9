package dynamodb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
)

// The reclaim test (issue 14's acceptance): a process holding concurrency
// leases is killed with SIGKILL; after their expiry a reconciler gives back
// exactly those slots, none twice, while other processes keep acquiring,
// and the bound is never exceeded. Processes are this test binary started
// again (TestMain sees reclaimRoleEnv), as separate machines would be.
const (
	reclaimRoleEnv  = "TOLLGATE_RECLAIM_ROLE" // "victim" or "survivor"
	reclaimUntilEnv = "TOLLGATE_RECLAIM_UNTIL"
	reclaimSlots    = 10
	reclaimHeld     = 4               // leases the victim holds when it is killed
	reclaimExpiry   = 2 * time.Second // the victim's leases
	reclaimRun      = 6 * time.Second // how long the survivors acquire
)

var reclaimLimit = tollgate.ConcurrencyLimit("slots", reclaimSlots)

// reclaimResult is what a survivor reports on stdout.
type reclaimResult struct {
	Grants int64  `json:"grants"`
	Late   int64  `json:"late"` // grants after the victim's leases expired
	Errors int64  `json:"errors"`
	Error  string `json:"error,omitempty"`
}

func runReclaimWorker() int {
	endpoint = os.Getenv(mpEndpointEnv)
	s, err := New(localConfig(), os.Getenv(mpTableEnv), []Option{WithCallTimeout(testCallTimeout)}, atLocal)
	if err != nil {
		fmt.Println(`{"error":` + strconv.Quote(err.Error()) + `}`)
		return 1
	}
	if os.Getenv(reclaimRoleEnv) == "victim" {
		return victim(s)
	}
	until, _ := strconv.ParseInt(os.Getenv(reclaimUntilEnv), 10, 64)
	_ = json.NewEncoder(os.Stdout).Encode(survive(s, time.UnixMilli(until)))
	return 0
}

// victim takes reclaimHeld slots with short leases, prints their ids, and
// waits to be killed.
func victim(s *Store) int {
	ctx := context.Background()
	lim, err := tollgate.New(s, tollgate.WithHolder("victim"))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var held []*tollgate.Lease
	for len(held) < reclaimHeld {
		le, err := lim.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1},
			tollgate.WithLimits(reclaimLimit), tollgate.WithLeaseTTL(reclaimExpiry))
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		held = append(held, le)
		fmt.Println(le.ID())
	}
	select {} // held until SIGKILL
}

// survive acquires a slot, holds it a moment and commits it, from 8
// goroutines, until the deadline.
func survive(s *Store, until time.Time) reclaimResult {
	ctx := context.Background()
	lim, err := tollgate.New(s, tollgate.WithHolder("survivor"))
	if err != nil {
		return reclaimResult{Error: err.Error()}
	}
	freed := time.Now().Add(reclaimExpiry)
	var grants, late, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(until) {
				le, err := lim.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1},
					tollgate.WithLimits(reclaimLimit), tollgate.WithLeaseTTL(time.Minute))
				switch {
				case err == nil:
					grants.Add(1)
					if time.Now().After(freed) {
						late.Add(1)
					}
					time.Sleep(20 * time.Millisecond) // the work the slot is for
					if err := le.Commit(ctx); err != nil && errs.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
				case errors.Is(err, tollgate.ErrRateLimited):
					time.Sleep(10 * time.Millisecond) // every slot taken: poll
				default:
					if errs.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
				}
			}
		})
	}
	wg.Wait()
	res := reclaimResult{Grants: grants.Load(), Late: late.Load(), Errors: errs.Load()}
	if e, ok := firstErr.Load().(string); ok {
		res.Error = e
	}
	return res
}

// startWorker starts this binary in role, with its stdout piped.
func startWorker(t *testing.T, s *Store, role string, until time.Time) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), reclaimRoleEnv+"="+role, mpTableEnv+"="+s.table, mpEndpointEnv+"="+endpoint,
		reclaimUntilEnv+"="+strconv.FormatInt(until.UnixMilli(), 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

func TestReclaimAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	ctx := context.Background()
	s := newTable(t)

	// The victim takes its slots and is killed holding them.
	victimCmd, lines := startWorker(t, s, "victim", time.Time{})
	var victimIDs []string
	for len(victimIDs) < reclaimHeld && lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "error:") {
			t.Fatalf("victim: %s", line)
		}
		victimIDs = append(victimIDs, line)
	}
	if len(victimIDs) != reclaimHeld {
		t.Fatalf("victim printed %d lease ids, want %d", len(victimIDs), reclaimHeld)
	}
	if err := victimCmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = victimCmd.Wait()
	killed := time.Now()

	// Two survivors acquire through the expiry and the reclaim; a watcher
	// reads the bucket all along: its free slots never below 0 (more than
	// 10 held) nor above 10 (a slot given back twice).
	ns := mustNamespaceID(t, s, tollgate.DefaultNamespace)
	until := killed.Add(reclaimRun)
	var survivors []*bufio.Scanner
	var cmds []*exec.Cmd
	for range 2 {
		cmd, out := startWorker(t, s, "survivor", until)
		cmds, survivors = append(cmds, cmd), append(survivors, out)
	}
	watchDone := make(chan struct{})
	var watchErr atomic.Value
	var reads atomic.Int64
	// The least free after the victim's slots are surely back (expiry, a
	// reconciler pass, a margin): below the 6 the victim left, the
	// survivors are using what was reclaimed.
	var leastLate atomic.Int64
	leastLate.Store(reclaimSlots * 1000)
	reclaimedBy := killed.Add(reclaimExpiry + time.Second)
	go func() {
		defer close(watchDone)
		for time.Now().Before(until) {
			free, err := freeSlots(ctx, s, ns)
			if err == nil && (free < 0 || free > reclaimSlots*1000) {
				watchErr.Store(fmt.Sprintf("free slots %d millitokens, want 0 to %d", free, reclaimSlots*1000))
				return
			}
			if err == nil && time.Now().After(reclaimedBy) && free < leastLate.Load() {
				leastLate.Store(free)
			}
			reads.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// Two reconcilers, racing, from the moment of the kill.
	var mu sync.Mutex
	var reclaimed []string
	rctx, stop := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	var recs []*reconcile.Reconciler
	for range 2 {
		r, err := reconcile.New(s, reconcile.WithInterval(250*time.Millisecond),
			reconcile.WithLogger(slog.New(slog.NewTextHandler(testLog{t}, nil))), reconcile.WithOnReclaim(func(rc reconcile.Reclaimed) {
				mu.Lock()
				reclaimed = append(reclaimed, rc.Lease.ID)
				mu.Unlock()
			}))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
		rwg.Go(func() { _ = r.Run(rctx) })
	}

	var results []reclaimResult
	for i, out := range survivors {
		var res reclaimResult
		if !out.Scan() || json.Unmarshal(out.Bytes(), &res) != nil {
			t.Fatalf("survivor %d printed nothing usable: %q", i, out.Text())
		}
		_ = cmds[i].Wait()
		results = append(results, res)
	}
	stop()
	rwg.Wait()
	<-watchDone

	if e, ok := watchErr.Load().(string); ok {
		t.Errorf("bound exceeded: %s", e)
	}
	slices.Sort(reclaimed)
	slices.Sort(victimIDs)
	if !slices.Equal(reclaimed, victimIDs) {
		t.Errorf("reclaimed %v, want exactly the victim's leases %v", reclaimed, victimIDs)
	}
	var grants, late int64
	for i, r := range results {
		if r.Errors > 0 || r.Error != "" {
			t.Errorf("survivor %d: %d errors; %s", i, r.Errors, r.Error)
		}
		grants, late = grants+r.Grants, late+r.Late
	}
	if late == 0 {
		t.Error("the survivors acquired nothing after the victim's leases expired")
	}
	if least := leastLate.Load(); least >= (reclaimSlots-reclaimHeld)*1000 {
		t.Errorf("after the reclaim, at least %d millitokens stayed free: the survivors never used the reclaimed slots", least)
	}
	if free, err := freeSlots(ctx, s, ns); err != nil || free != reclaimSlots*1000 {
		t.Errorf("free slots at the end = %d millitokens (%v), want %d: every slot back once", free, err, reclaimSlots*1000)
	}
	if open, _, err := s.ListLeases(ctx, ns, store.LeaseQuery{Limit: 10}); err != nil || len(open) != 0 {
		t.Errorf("lease records left: %d (%v), want none", len(open), err)
	}
	evs, err := s.ListAudit(ctx, ns, "job", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	expired := 0
	for _, ev := range evs {
		if ev.Action == model.ActionLeaseExpired {
			expired++
		}
	}
	var st reconcile.Stats
	for _, r := range recs {
		s := r.Stats()
		st.Reclaimed, st.Skipped, st.Failed = st.Reclaimed+s.Reclaimed, st.Skipped+s.Skipped, st.Failed+s.Failed
	}
	if expired != reclaimHeld || st.Reclaimed != reclaimHeld {
		t.Errorf("%d lease.expired events, %d reclaimed by the reconcilers; want %d each", expired, st.Reclaimed, reclaimHeld)
	}
	t.Logf("victim killed holding %d of %d slots; reconcilers reclaimed %v (%d skipped, %d failed); survivors: %d grants, %d after the expiry, as few as %d slots free after the reclaim; %d bucket reads, bound held",
		reclaimHeld, reclaimSlots, reclaimed, st.Skipped, st.Failed, grants, late, leastLate.Load()/1000, reads.Load())
}

// freeSlots reads the free slots of job/emr (millitokens).
func freeSlots(ctx context.Context, s *Store, ns string) (int64, error) {
	recs, err := s.ReadBuckets(ctx, ns, []store.BucketKey{{Entity: "job", Resource: "emr"}})
	if err != nil {
		return 0, err
	}
	if recs[0] == nil {
		return reclaimSlots * 1000, nil
	}
	i := recs[0].Find("slots")
	if i < 0 {
		return 0, errors.New("no slots limit")
	}
	return recs[0].Limits[i].State.Tokens, nil
}

// testLog writes a logger's lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
