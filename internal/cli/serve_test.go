package cli

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// served is a `tollgate serve` running in this process.
type served struct {
	url  string
	stop func() int // stops it gracefully and returns its exit code
	// lines has its log lines from the one after "listening" on (up to
	// its buffer: later ones are dropped rather than block the server).
	lines <-chan string
}

// waitLog returns the first log line that contains want, failing the test
// if none comes within 30 s (the server's own timing, not a sleep).
func (s served) waitLog(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line := <-s.lines:
			if strings.Contains(line, want) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line with %q", want)
		}
	}
}

var listeningRE = regexp.MustCompile(`msg=listening url=(\S+)`)

// startServe runs `tollgate serve --addr 127.0.0.1:0 args...` in-process
// and waits until it listens.
func startServe(t *testing.T, args ...string) served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	found := make(chan string, 1)
	lines := make(chan string, 256)
	var log strings.Builder // until found: read only when found is closed
	go func() {
		sc := bufio.NewScanner(pr)
		listening := false
		for sc.Scan() {
			// Every line goes to waitLog, those before "listening" too: the
			// reconciler's first pass may log before the server listens.
			select {
			case lines <- sc.Text():
			default:
			}
			if listening {
				continue
			}
			log.WriteString(sc.Text() + "\n")
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				listening = true
				found <- m[1]
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, pr) // past a line too long to scan
	}()
	url, ok := <-found
	if !ok {
		cancel()
		t.Fatalf("serve exited with %d: %s", <-code, log.String())
	}
	stopped := false
	stop := func() int {
		stopped = true
		cancel()
		return <-code
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return served{url: url, stop: stop, lines: lines}
}

// usageExpiry returns the expiry of the usage snapshots in the default
// namespace of the embedded file at path, by window.
func usageExpiry(t *testing.T, path string) map[store.Window]time.Duration {
	t.Helper()
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ns, err := st.GetNamespace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	out := map[store.Window]time.Duration{}
	for _, w := range []store.Window{store.Hourly, store.Daily} {
		snaps, err := st.ListUsage(ctx, ns.ID, store.UsageQuery{Entity: "k", Window: w, From: 0, To: time.Now().Add(time.Hour).UnixMilli()})
		if err != nil || len(snaps) != 1 {
			t.Fatalf("%s usage: %+v, %v", w, snaps, err)
		}
		out[w] = time.Duration(snaps[0].Expires-snaps[0].Key.Start)*time.Millisecond - w.Duration()
	}
	return out
}

// serve --retention (or TOLLGATE_RETENTION, which the flag beats) sets how
// long the usage snapshots it records are kept after their window.
func TestServeRetention(t *testing.T) {
	for _, tt := range []struct {
		env, flag string
		want      time.Duration
	}{
		{"", "", 90 * 24 * time.Hour},
		{"72h", "", 72 * time.Hour},
		{"72h", "48h", 48 * time.Hour},
	} {
		t.Setenv(envRetentionName, tt.env)
		path := filepath.Join(t.TempDir(), "t.db")
		args := []string{"--store", "embedded:" + path}
		if tt.flag != "" {
			args = append(args, "--retention", tt.flag)
		}
		s := startServe(t, args...)
		c, err := client.New(s.url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.AcquireAndCommit(context.Background(), "k", "api", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 5))); err != nil {
			t.Fatal(err)
		}
		if code := s.stop(); code != ExitOK { // the recorder flushes at the stop
			t.Fatalf("serve exited with %d", code)
		}
		for w, got := range usageExpiry(t, path) {
			if got != tt.want {
				t.Errorf("env %q flag %q: %s snapshot kept %v after its window, want %v", tt.env, tt.flag, w, got, tt.want)
			}
		}
	}
	t.Setenv(envRetentionName, "")
	if code, _, _ := run(t, "", "serve", "--store", "memory:", "--retention", "0s"); code != ExitUsage {
		t.Errorf("--retention 0s: exit %d, want %d", code, ExitUsage)
	}
	t.Setenv(envRetentionName, "forever")
	if code, _, _ := run(t, "", "serve", "--store", "memory:"); code != ExitUsage {
		t.Errorf("%s=forever: exit %d, want %d", envRetentionName, code, ExitUsage)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir, and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "tollgate test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// serve --tls-cert/--tls-key serves HTTPS: a client trusting the
// certificate works, one that does not is refused, and plain HTTP gets no
// API answer.
func TestServeTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	s := startServe(t, "--store", "memory:", "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(s.url, "https://127.0.0.1:") {
		t.Fatalf("serve listens on %s, want https", s.url)
	}
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, err := client.New(s.url, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 5)))
	if err != nil || g.Consumed["rpm"] != 1 {
		t.Fatalf("over TLS: %+v, %v", g, err)
	}
	untrusting, err := client.New(s.url)
	if err != nil {
		t.Fatal(err)
	}
	var unknownCA x509.UnknownAuthorityError
	if err := untrusting.Healthy(ctx); !errors.As(err, &unknownCA) {
		t.Errorf("a client without the CA: %v, want an unknown-authority error", err)
	}
	plain, err := client.New("http://" + strings.TrimPrefix(s.url, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Healthy(ctx); err == nil {
		t.Error("plain HTTP to the TLS port succeeded")
	}
	if code, _, _ := run(t, "", "serve", "--store", "memory:", "--tls-cert", certFile); code != ExitUsage {
		t.Errorf("--tls-cert without --tls-key: exit %d, want %d", code, ExitUsage)
	}
}

// The aggregator reads --retention and TOLLGATE_RETENTION as serve does,
// and refuses a bad one before it opens the store.
func TestAggregatorRetentionIsChecked(t *testing.T) {
	const unreachable = "dynamodb://t?region=us-east-1&endpoint=http://127.0.0.1:1"
	t.Setenv(envRetentionName, "")
	if code, _, errOut := run(t, "", "aggregator", "--store", unreachable, "--retention", "0s"); code != ExitUsage {
		t.Errorf("--retention 0s: exit %d (%s), want %d", code, errOut, ExitUsage)
	}
	t.Setenv(envRetentionName, "forever")
	if code, _, errOut := run(t, "", "aggregator", "--store", unreachable); code != ExitUsage || !strings.Contains(errOut, envRetentionName) {
		t.Errorf("%s=forever: exit %d (%s), want %d naming the variable", envRetentionName, code, errOut, ExitUsage)
	}
}

// expiredLease writes, into a new embedded store at path, a lease holding
// the one slot of "slots" for k/jobs that expired an hour ago, as a holder
// that crashed would leave it, and returns its id.
func expiredLease(t *testing.T, path string) string {
	t.Helper()
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lim, err := tollgate.New(st, tollgate.WithClock(clock.NewFake(time.Now().Add(-2*time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	le, err := lim.Acquire(context.Background(), "k", "jobs", tollgate.Consume{"slots": 1},
		tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1)), tollgate.WithLeaseTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return le.ID()
}

// serve runs a reconciler (its first pass at once): a lease that expired
// while no server ran is committed and its slot is back, counted in
// tollgate_leases_expired_total. With --reconcile-interval 0 none runs.
// --max-leases is accepted and does nothing.
func TestServeReconciles(t *testing.T) {
	slot := client.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		args      []string
		reclaimed bool
	}{
		{"default", nil, true},
		{"off", []string{"--reconcile-interval", "0"}, false},
		{"deprecated --max-leases", []string{"--reconcile-interval", "1h", "--max-leases", "10"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			id := expiredLease(t, path)
			s := startServe(t, append([]string{"--store", "embedded:" + path}, c.args...)...)
			cl, err := client.New(s.url)
			if err != nil {
				t.Fatal(err)
			}
			if !c.reclaimed {
				if _, err := cl.AcquireAndCommit(ctx, "k", "jobs", tollgate.Consume{"slots": 1}, slot); !errors.Is(err, tollgate.ErrRateLimited) {
					t.Errorf("without a reconciler: %v, want the slot still held", err)
				}
				return
			}
			if line := s.waitLog(t, "expired lease committed"); !strings.Contains(line, "lease="+id) {
				t.Errorf("log %q, want lease=%s", line, id)
			}
			if _, err := cl.AcquireAndCommit(ctx, "k", "jobs", tollgate.Consume{"slots": 1}, slot); err != nil {
				t.Errorf("after the reconciler: %v, want the slot back", err)
			}
			resp, err := http.Post(s.url+"/v1/leases/"+id+"/commit", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict {
				t.Errorf("commit of the reclaimed lease: %d, want 409 (lease_closed, expired)", resp.StatusCode)
			}
			resp, err = http.Get(s.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(data), "\ntollgate_leases_expired_total 1\n") {
				t.Errorf("metrics lack tollgate_leases_expired_total 1")
			}
		})
	}
	if code, _, _ := run(t, "", "serve", "--store", "memory:", "--reconcile-interval", "-1s"); code != ExitUsage {
		t.Errorf("--reconcile-interval -1s: exit %d, want %d", code, ExitUsage)
	}
}

// serve --deny-cache answers refusals from memory (semantics.md 17) of
// acquires without an idempotency key (a keyed one may be the retry of a
// grant, and goes to the store); a reset through the server, whose admin
// shares its limiters' change watch, is in force at the next acquire all
// the same. A negative value is a usage error.
func TestServeDenyCache(t *testing.T) {
	ctx := context.Background()
	s := startServe(t, "--store", "memory:", "--deny-cache", "1h")
	cl, err := client.New(s.url, client.WithoutIdempotencyKeys())
	if err != nil {
		t.Fatal(err)
	}
	limits := client.WithLimits(tollgate.RateLimit("rph", 2, time.Hour))
	one := tollgate.Consume{"rph": 1}
	for i := range 2 {
		if _, err := cl.AcquireAndCommit(ctx, "k", "api", one, limits); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	for i := range 3 {
		if _, err := cl.AcquireAndCommit(ctx, "k", "api", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
			t.Fatalf("refusal %d: %v, want ErrRateLimited", i, err)
		}
	}
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(data), "\ntollgate_deny_cache_served_total 2\n") {
		t.Errorf("metrics lack tollgate_deny_cache_served_total 2 (3 refusals, the first the store's)")
	}
	if err := cl.Reset(ctx, "k", "api", "test", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AcquireAndCommit(ctx, "k", "api", one, limits); err != nil {
		t.Errorf("after the reset: %v, want a grant", err)
	}
	if code, _, stderr := run(t, "", "serve", "--store", "memory:", "--deny-cache", "-1s"); code != ExitUsage || !strings.Contains(stderr, "--deny-cache -1s") {
		t.Errorf("--deny-cache -1s: exit %d (%s), want %d", code, strings.TrimSpace(stderr), ExitUsage)
	}
}
