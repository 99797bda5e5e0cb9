package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// The kill -9 test runs this test binary again as a child process (TestMain
// sees crashChildEnv) that works on a store file until the test kills it
// with SIGKILL, then reopens the file and checks what survived.
const (
	crashChildEnv = "TOLLGATE_EMBEDDED_CRASH_FILE" // the store file of the child
	crashInterval = 50 * time.Millisecond          // the child's flush interval
	crashFlushes  = 5                              // flushes the test waits for before the kill (at least)
	// crashMaxRun ends a child nobody killed (its test failed or hung).
	crashMaxRun = 2 * time.Minute
)

// crashUsage is the usage snapshot the child adds before it is ready.
var crashUsage = store.UsageIncrement{
	Key:      store.UsageKey{Entity: "key-a", Resource: "api", Window: store.Hourly, Start: store.Hourly.Start(t0)},
	Consumed: map[string]int64{"rpd": 1000}, Events: 1, Source: "crash", Seq: "1",
}

const crashUsageNS = "usage-ns"

// crashChild is the child's main: it writes the scenario (setUp) and a
// usage snapshot (crashUsage), prints "ready", then acquires 1 token at a time, alternating key-a and key-b
// (each cascading into org), until it is killed. After every flush it
// prints "durable N": N acquires are in the file for sure (see observe).
func crashChild() int {
	if err := runCrashChild(os.Getenv(crashChildEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	return 0
}

func runCrashChild(path string) error {
	ctx := context.Background()
	var acked atomic.Int64
	// Flushes and their observer calls run one after another, so an
	// acquire counted at one observer call returned before the next
	// flush's snapshot: once that flush has committed, it is durable.
	var before int64 // acquires acknowledged at the previous observer call
	observe := func(fi embedded.FlushInfo) {
		if fi.Err != nil {
			fmt.Printf("error %v\n", fi.Err)
			return
		}
		fmt.Printf("durable %d\n", before)
		before = acked.Load()
	}
	s, err := embedded.Open(path, embedded.WithFlushInterval(crashInterval), embedded.WithFlushObserver(observe))
	if err != nil {
		return err
	}
	lim, err := newLimiter(s)
	if err != nil {
		return err
	}
	if err := setUp(ctx, s); err != nil {
		return err
	}
	// Usage is written by AddUsage's own transaction, never by a flush:
	// it must be in the file as soon as the call returns.
	if err := s.AddUsage(ctx, crashUsageNS, []store.UsageIncrement{crashUsage}); err != nil {
		return err
	}
	fmt.Println("ready")
	stop := time.Now().Add(crashMaxRun)
	for i := 0; time.Now().Before(stop); i++ {
		entity := "key-a"
		if i%2 == 1 {
			entity = "key-b"
		}
		le, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"rpd": 1})
		if err != nil {
			return err
		}
		if err := le.Commit(ctx); err != nil {
			return err
		}
		acked.Add(1)
	}
	return errors.New("not killed within " + crashMaxRun.String())
}

// A process killed with SIGKILL in the middle of acquiring leaves a file
// that opens, holds every config, entity, audit event and namespace it
// wrote (usage included), holds every acquire the child saw flushed (so at most the last
// interval of consumption is lost), and holds whole cascades only.
func TestKill9LosesAtMostOneInterval(t *testing.T) {
	path := tempFile(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	// Wait for a few flushes, and for one that committed acquires, however
	// slowly a loaded machine runs the child: the loss bound below is in
	// terms of what the child saw flushed, never of wall time. Only a
	// child that reports nothing for a minute (hung) fails the test.
	var p childProgress
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	for p.flushes < crashFlushes || p.durable == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child exited early: %s", stderr.Bytes())
			}
			p.read(t, l)
			idle.Reset(time.Minute)
		case <-idle.C:
			t.Fatalf("the child reported nothing for a minute; so far: %+v", p)
		}
	}
	if !p.ready {
		t.Fatal("child flushed before it was ready")
	}
	// While the child holds the file, this process cannot open it.
	if s, err := embedded.Open(path, embedded.WithLockTimeout(100*time.Millisecond)); !errors.Is(err, embedded.ErrLocked) {
		if s != nil {
			_ = s.Close()
		}
		t.Errorf("Open while the child holds the file = %v, want ErrLocked", err)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	killed = true
	for l := range lines { // what the child printed before it died
		p.read(t, l)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child ended with %v, want killed; stderr: %s", err, stderr.Bytes())
	}

	s := open(t, path)
	checkSetUp(t, s)
	k := crashUsage.Key
	snaps, err := s.ListUsage(t.Context(), crashUsageNS, store.UsageQuery{Entity: k.Entity, Window: k.Window, From: k.Start, To: k.Start + 1})
	if err != nil || len(snaps) != 1 || snaps[0].Events != 1 || snaps[0].Consumed["rpd"] != 1000 {
		t.Errorf("usage added before the kill: %+v, %v", snaps, err)
	}
	got := consumed(t, s, "key-a", "key-b", "org")
	a, b, org := got[0], got[1], got[2]
	t.Logf("after %d flushes: key-a %d, key-b %d, org %d; acknowledged and flushed for sure: %d", p.flushes, a, b, org, p.durable)
	if org != a+b {
		t.Errorf("org consumed %d, keys %d + %d: a cascade is only partly in the file", org, a, b)
	}
	if a != b && a != b+1 {
		t.Errorf("key-a %d, key-b %d: not a state the alternating child went through", a, b)
	}
	if a+b < p.durable {
		t.Errorf("%d acquires in the file, but %d were acknowledged before a flush that committed", a+b, p.durable)
	}
	// The recovered store serves on.
	lim, err := newLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, lim, "key-b", 1).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := consumed(t, s, "org"); got[0] != org+1 {
		t.Errorf("org consumed %d after one more acquire, want %d", got[0], org+1)
	}
}

// childProgress is what the crash child reported.
type childProgress struct {
	ready   bool
	flushes int
	durable int64 // the largest "durable" count
}

func (p *childProgress) read(t *testing.T, line string) {
	t.Helper()
	switch f := strings.Fields(line); {
	case line == "ready":
		p.ready = true
	case len(f) == 2 && f[0] == "durable":
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("child: %q", line)
		}
		p.flushes++
		p.durable = max(p.durable, n)
	default:
		t.Fatalf("child: %q", line)
	}
}
