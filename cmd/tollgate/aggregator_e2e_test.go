package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// The `tollgate aggregator` process end to end, on DynamoDB Local: two
// instances on one table count every acquire exactly once; when the one
// reading the stream is killed, the other takes its shards over once the
// lease expires and counts the rest, nothing twice; and a bucket written at
// 90% of its write-pressure limit is split ahead of its writers (the
// upkeep).
//
// Real processes take wall time: every wait polls for an outcome with a
// generous deadline, and the only assertion about time is one the design
// guarantees (nothing is read from a dead instance's shard before its
// lease expires).
func TestAggregatorProcesses(t *testing.T) {
	ctx := context.Background()
	local, err := ddblocal.Start(ctx)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = local.Stop() })
	// A table of its own, should TOLLGATE_DYNAMODB_ENDPOINT name a shared
	// server.
	table := "agg-" + time.Now().Format("150405.000000")
	storeURL := "dynamodb://" + table + "?endpoint=" + local.Endpoint
	// DynamoDB Local keeps a set of tables per access key and region: the
	// processes and this test use the same.
	env := []string{"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1"}
	tg := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(tollgateBinary(t), append(args, "--store", storeURL)...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tollgate %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return out
	}
	tg("deploy")

	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	atLocal := func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(local.Endpoint) }
	s, err := dynamodb.New(cfg, table, nil, atLocal)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the processes are killed before this.
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	db := awsdynamodb.NewFromConfig(cfg, atLocal) // to read lease and bucket items
	// The limiter follows the admin's change watch, so that it sees the
	// entities the admin creates at its next call.
	watch, err := tollgate.NewChangeWatch(s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := tollgate.New(s, tollgate.WithChangeWatch(watch))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := tollgate.NewAdmin(s, tollgate.WithChangeWatch(watch))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e2e"} {
		if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := s.GetNamespace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(entity string, n int, limit tollgate.Limit) {
		t.Helper()
		for range n {
			le, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{limit.Name: 1}, tollgate.WithLimits(limit))
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	rpm := tollgate.PerMinute("rpm", 10_000)
	var procs []*aggregatorProc
	logs := func() string {
		var b strings.Builder
		for _, p := range procs {
			fmt.Fprintf(&b, "--- aggregator %s:\n%s", p.owner, p.out)
		}
		return b.String()
	}
	// usage sums entity's daily snapshots on api, through the library.
	usage := func(entity, limit string) (events, tokens int64) {
		t.Helper()
		now := time.Now()
		us, _, err := adm.Usage(ctx, tollgate.UsageQuery{Entity: entity, Resource: "api", Window: tollgate.Daily,
			From: now.Add(-48 * time.Hour), To: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			events += u.Events
			tokens += u.Consumed[limit]
		}
		return events, tokens
	}
	// waitUsage waits until entity's usage is n acquires of one token each,
	// and fails at once if it ever goes beyond. All of an entity's acquires
	// write one bucket item, whose stream records are read in order: once
	// the last one is counted, no earlier one is left to count again.
	waitUsage := func(when, entity, limit string, n int64) time.Time {
		t.Helper()
		deadline := time.Now().Add(processWait)
		for {
			ev, tk := usage(entity, limit)
			switch {
			case ev > n || tk > n:
				t.Fatalf("%s: %s counted %d acquires, %d tokens; want %d: counted twice\n%s", when, entity, ev, tk, n, logs())
			case ev == n && tk == n:
				return time.Now()
			case time.Now().After(deadline):
				t.Fatalf("%s: %s counted %d acquires, %d tokens after %v; want %d\n%s", when, entity, ev, tk, processWait, n, logs())
			}
			time.Sleep(50 * time.Millisecond) // polling the processes' work in DynamoDB Local
		}
	}
	// cliUsage checks the same through `tollgate usage list -o json`.
	cliUsage := func(when, entity, limit string, n int64) {
		t.Helper()
		var u api.UsageResponse
		out := tg("usage", "list", "-e", entity, "-r", "api", "--window", "day", "--since", "48h", "-o", "json")
		if err := json.Unmarshal(out, &u); err != nil {
			t.Fatalf("usage list: %v: %s", err, out)
		}
		var ev, tk int64
		for _, x := range u.Usage {
			ev += x.Events
			tk += x.Consumed[limit]
		}
		if ev != n || tk != n {
			t.Errorf("%s: tollgate usage list shows %d acquires, %d tokens of %s; want %d: %s", when, ev, tk, entity, n, out)
		}
	}
	// leases returns the stream shard leases in the table, by shard.
	leases := func() map[string]streamLease {
		t.Helper()
		out, err := db.Query(ctx, &awsdynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :p)"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":pk": &ddbtypes.AttributeValueMemberS{Value: "_/SYSTEM#"},
				":p":  &ddbtypes.AttributeValueMemberS{Value: "#STREAMLEASE#"},
			}})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]streamLease{}
		for _, it := range out.Items {
			shard := strings.TrimPrefix(attrS(it, "SK"), "#STREAMLEASE#")
			m[shard] = streamLease{owner: attrS(it, "owner"), expires: attrN(t, it, "expires")}
		}
		return m
	}

	// 1. Two instances; acquires through the library are counted once.
	a, b := startAggregator(t, env, storeURL), startAggregator(t, env, storeURL)
	procs = append(procs, a, b)
	acquire("e2e", 8, rpm)
	waitUsage("two instances", "e2e", "rpm", 8)
	cliUsage("two instances", "e2e", "rpm", 8)

	// 2. Kill (SIGKILL) the instance that holds the stream shard, right
	// after acquires it may be reading; more acquires follow at once.
	var victim, survivor *aggregatorProc
	var victimShards []string
	for deadline := time.Now().Add(processWait); victim == nil; {
		now := time.Now().UnixMilli()
		for _, l := range leases() {
			if l.expires <= now {
				continue
			}
			switch l.owner {
			case a.owner:
				victim, survivor = a, b
			case b.owner:
				victim, survivor = b, a
			}
		}
		if victim == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no live lease of either instance: %v\n%s", leases(), logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for shard, l := range leases() {
		if l.owner == victim.owner {
			victimShards = append(victimShards, shard)
		}
	}
	acquire("e2e", 3, rpm)
	victim.kill()
	var expires int64 // when the dead instance's last lease runs out
	for shard, l := range leases() {
		if l.owner == victim.owner {
			expires = max(expires, l.expires)
			if !slices.Contains(victimShards, shard) {
				victimShards = append(victimShards, shard)
			}
		}
	}
	acquire("e2e", 3, rpm)
	counted := waitUsage("after the kill", "e2e", "rpm", 14)
	if counted.UnixMilli() < expires {
		t.Errorf("the acquires after the kill were counted %v before the dead instance's lease expired", time.UnixMilli(expires).Sub(counted))
	}
	for shard, l := range leases() {
		if slices.Contains(victimShards, shard) && l.owner != survivor.owner {
			t.Errorf("shard %s of the dead instance: lease %+v; want the survivor's (%s)", shard, l, survivor.owner)
		}
	}
	if len(victimShards) == 0 {
		t.Errorf("the killed instance held no lease\n%s", logs())
	}
	cliUsage("after the kill", "e2e", "rpm", 14)

	// 3. A clean stop hands the shards over; 9 writes within a second on a
	// bucket whose writers meter 10 writes a second (below their own
	// split), while no instance reads, come to the next instance, which
	// splits the bucket ahead of its writers (the upkeep). DynamoDB Local
	// dates records to the minute, which the upkeep reads as one second:
	// the burst is made again on another bucket should it straddle a
	// minute.
	if code := survivor.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, logs())
	}
	for shard, l := range leases() {
		if l.owner == survivor.owner {
			t.Errorf("shard %s: the stopped instance's lease %+v is still there", shard, l)
		}
	}
	metered, err := dynamodb.New(cfg, table, []dynamodb.Option{dynamodb.WithWritePressureLimit(10)}, atLocal)
	if err != nil {
		t.Fatal(err)
	}
	writers, err := tollgate.New(metered)
	if err != nil {
		t.Fatal(err)
	}
	tps := tollgate.PerSecond("tps", 1_000)
	var hot string
	for try := 0; ; try++ {
		hot = fmt.Sprintf("e2e-hot-%d", try)
		before := time.Now()
		for range 9 {
			le, err := writers.Acquire(ctx, hot, "api", tollgate.Consume{"tps": 1}, tollgate.WithLimits(tps))
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if before.Truncate(time.Minute).Equal(time.Now().Truncate(time.Minute)) || try == 2 {
			break
		}
	}
	shards := func() int64 {
		t.Helper()
		out, err := db.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{
				"PK": &ddbtypes.AttributeValueMemberS{Value: ns.ID + "/BUCKET#" + hot + "#api#0"},
				"SK": &ddbtypes.AttributeValueMemberS{Value: "#STATE"},
			}})
		if err != nil || out.Item == nil {
			t.Fatalf("read bucket %s: %v", hot, err)
		}
		return attrN(t, out.Item, "shard_count")
	}
	if n := shards(); n != 1 {
		t.Fatalf("the writers split the bucket themselves (%d shards)", n)
	}
	c := startAggregator(t, env, storeURL)
	procs = append(procs, c)
	waitUsage("after the burst", hot, "tps", 9)
	for deadline := time.Now().Add(processWait); shards() != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the hot bucket was not split: %d shards\n%s", shards(), logs())
		}
		time.Sleep(50 * time.Millisecond) // polling the process's work in DynamoDB Local
	}
	for deadline := time.Now().Add(processWait); !strings.Contains(c.out.String(), "split hot buckets"); {
		if time.Now().After(deadline) {
			t.Fatalf("no split in the log:\n%s", c.out)
		}
		time.Sleep(50 * time.Millisecond) // polling the process's output
	}
	// A restart counts nothing twice either.
	waitUsage("after a restart", "e2e", "rpm", 14)
	cliUsage("after a restart", hot, "tps", 9)
	if code := c.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM\n%s", code, logs())
	}
}

// processWait bounds every wait for an outcome of the processes: long
// enough for a heavily loaded machine, reached only when something is
// broken.
const processWait = 2 * time.Minute

// aggregatorProc is a running `tollgate aggregator`.
type aggregatorProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	out   *syncBuffer
	owner string        // its lease owner name, from its log
	done  chan struct{} // closed once it has exited
}

var leaseOwnerLog = regexp.MustCompile(`msg="aggregating usage from the stream".* owner=(\S+)`)

// startAggregator starts `tollgate aggregator` on storeURL with a 2 s shard
// lease and a 100 ms poll, and waits until it names its lease owner.
func startAggregator(t *testing.T, env []string, storeURL string) *aggregatorProc {
	t.Helper()
	cmd := exec.Command(tollgateBinary(t), "aggregator", "--store", storeURL,
		"--shard-lease", "2s", "--poll", "100ms", "--log-level", "debug")
	cmd.Env = append(os.Environ(), env...)
	p := &aggregatorProc{t: t, cmd: cmd, out: new(syncBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	deadline := time.After(processWait)
	for {
		if m := leaseOwnerLog.FindStringSubmatch(p.out.String()); m != nil {
			p.owner = m[1]
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("tollgate aggregator exited: %s", p.out)
		case <-deadline:
			t.Fatalf("tollgate aggregator did not start: %s", p.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *aggregatorProc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	<-p.done
}

// stop sends sig and returns the exit code.
func (p *aggregatorProc) stop(sig os.Signal) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(processWait):
		p.t.Fatalf("tollgate aggregator did not stop: %s", p.out)
	}
	return p.cmd.ProcessState.ExitCode()
}

// syncBuffer collects a process's output; safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// streamLease is a lease item of the stream aggregator
// (store/dynamodb/stream/shardlease.go).
type streamLease struct {
	owner   string
	expires int64 // Unix ms
}

func attrS(it map[string]ddbtypes.AttributeValue, name string) string {
	if v, ok := it[name].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(t *testing.T, it map[string]ddbtypes.AttributeValue, name string) int64 {
	t.Helper()
	v, ok := it[name].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		t.Fatalf("item %v has no number %s", it, name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}
