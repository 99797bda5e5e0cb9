package faultproxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/tollgate-rl/tollgate/internal/faultproxy"
)

// upstream is an HTTP server that counts the requests it receives and
// echoes their bodies.
type upstream struct {
	*httptest.Server
	requests atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream", "yes")
		_, _ = w.Write(b)
	}))
	t.Cleanup(u.Close)
	return u
}

func startProxy(t *testing.T, upstream string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// post sends body through c to url with a timeout, and returns the status
// and the answer's body.
func post(c *http.Client, url, body string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitFor polls cond every few milliseconds until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// A loaded 2-core machine (the race detector, other test binaries) can
// hold a loopback round trip for tens of milliseconds; the bounds below
// leave a second or more for it.
const slack = 2 * time.Second

func TestModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     faultproxy.Mode
		status   int    // 0: no answer
		body     string // a substring of the answer
		reset    bool   // the error is a connection reset
		forwards bool
	}{
		{mode: faultproxy.Pass, status: 200, body: "hello", forwards: true},
		{mode: faultproxy.Throttle, status: 400, body: `"__type":"com.amazon.coral.availability#ThrottlingException"`},
		{mode: faultproxy.ProvisionedThroughput, status: 400, body: "#ProvisionedThroughputExceededException"},
		{mode: faultproxy.InternalError, status: 500, body: "#InternalServerError"},
		{mode: faultproxy.Unavailable, status: 503, body: "#ServiceUnavailableException"},
		{mode: faultproxy.Drop},
		{mode: faultproxy.Reset, reset: true},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			p := startProxy(t, up.URL)
			p.Set(tc.mode)
			c := &http.Client{Transport: &http.Transport{}}
			status, body, err := post(c, p.URL(), "hello", slack)
			switch {
			case tc.status == 0 && err == nil:
				t.Fatalf("answered %d %q, want no answer", status, body)
			case tc.status != 0 && err != nil:
				t.Fatal(err)
			case status != tc.status || !strings.Contains(body, tc.body):
				t.Errorf("answer %d %q, want %d with %q", status, body, tc.status, tc.body)
			}
			if tc.reset && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("error %v, want a connection reset", err)
			}
			if got := up.requests.Load() > 0; got != tc.forwards {
				t.Errorf("forwarded: %v, want %v", got, tc.forwards)
			}
			if n := p.Counts()[tc.mode.String()]; n != 1 {
				t.Errorf("counts %v, want 1 request in %s", p.Counts(), tc.mode)
			}
		})
	}
}

// TestDelay: the request is forwarded at once and its answer held; a
// client that gives up first has still had its request reach the store.
func TestDelay(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := startProxy(t, up.URL)
	const d = 300 * time.Millisecond
	p.Set(faultproxy.Delay(d))
	c := &http.Client{Transport: &http.Transport{}}
	start := time.Now()
	status, body, err := post(c, p.URL(), "late", d+slack)
	if took := time.Since(start); err != nil || status != 200 || body != "late" || took < d {
		t.Errorf("answer %d %q %v after %v, want 200 late after at least %v", status, body, err, took, d)
	}
	// A client that gives up before the answer: its request landed.
	if _, _, err := post(c, p.URL(), "gone", d/3); err == nil {
		t.Fatal("answered before the delay")
	}
	if !waitFor(slack, func() bool { return up.requests.Load() == 2 }) {
		t.Errorf("upstream saw %d requests, want 2: the abandoned one was not forwarded", up.requests.Load())
	}
}

// TestHang: requests are held, neither forwarded nor answered, also on a
// connection kept alive from before; when the mode changes they are
// handled under the new one, forwarded even if their client has gone.
func TestHang(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := startProxy(t, up.URL)
	c := &http.Client{Transport: &http.Transport{}}
	if _, _, err := post(c, p.URL(), "warm", slack); err != nil { // a kept-alive connection
		t.Fatal(err)
	}
	p.Set(faultproxy.Hang)
	const patience = 200 * time.Millisecond
	start := time.Now()
	if status, _, err := post(c, p.URL(), "abandoned", patience); err == nil {
		t.Fatalf("answered %d while hung", status)
	}
	if took := time.Since(start); took < patience {
		t.Errorf("gave up after %v, before the client's %v", took, patience)
	}
	if !waitFor(slack, func() bool { return p.Held() == 1 }) {
		t.Fatalf("%d held, want 1", p.Held())
	}
	// A patient client is answered once the hang ends.
	answered := make(chan string, 1)
	go func() {
		_, body, err := post(c, p.URL(), "patient", 10*slack)
		if err != nil {
			body = err.Error()
		}
		answered <- body
	}()
	if !waitFor(slack, func() bool { return p.Held() == 2 }) {
		t.Fatalf("%d held, want 2", p.Held())
	}
	if n := up.requests.Load(); n != 1 {
		t.Errorf("upstream saw %d requests while hung, want 1 (the one before)", n)
	}
	p.Set(faultproxy.Pass)
	if body := <-answered; body != "patient" {
		t.Errorf("the patient request got %q", body)
	}
	if !waitFor(slack, func() bool { return up.requests.Load() == 3 }) {
		t.Errorf("upstream saw %d requests after the hang, want 3: the abandoned one is forwarded too", up.requests.Load())
	}
	if n := p.Held(); n != 0 {
		t.Errorf("%d still held", n)
	}
}

// TestHangThenReset: requests held when the mode turns to Reset are reset.
func TestHangThenReset(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := startProxy(t, up.URL)
	p.Set(faultproxy.Hang)
	c := &http.Client{Transport: &http.Transport{}}
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(c, p.URL(), "held", 10*slack)
		errc <- err
	}()
	if !waitFor(slack, func() bool { return p.Held() == 1 }) {
		t.Fatalf("%d held, want 1", p.Held())
	}
	p.Set(faultproxy.Reset)
	if err := <-errc; !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("error %v, want a connection reset", err)
	}
	if n := up.requests.Load(); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
}

// TestClose: the requests held are dropped, not forwarded.
func TestClose(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := startProxy(t, up.URL)
	p.Set(faultproxy.Hang)
	c := &http.Client{Transport: &http.Transport{}}
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(c, p.URL(), "held", 10*slack)
		errc <- err
	}()
	if !waitFor(slack, func() bool { return p.Held() == 1 }) {
		t.Fatalf("%d held, want 1", p.Held())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Error("answered after Close")
	}
	if n := up.requests.Load(); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
}

// TestDynamoDBErrors: the SDK decodes the proxy's answers as DynamoDB's
// own errors, of the types it retries as throttling and server errors.
func TestDynamoDBErrors(t *testing.T) {
	t.Parallel()
	p := startProxy(t, "http://127.0.0.1:1") // never forwarded to
	db := dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("faultproxy", "test", ""),
		BaseEndpoint:     aws.String(p.URL()),
		RetryMaxAttempts: 1,
	})
	for _, tc := range []struct {
		mode faultproxy.Mode
		code string
		is   func(error) bool
	}{
		{faultproxy.Throttle, "ThrottlingException", nil},
		{faultproxy.ProvisionedThroughput, "ProvisionedThroughputExceededException",
			func(err error) bool { var e *types.ProvisionedThroughputExceededException; return errors.As(err, &e) }},
		{faultproxy.InternalError, "InternalServerError",
			func(err error) bool { var e *types.InternalServerError; return errors.As(err, &e) }},
		{faultproxy.Unavailable, "ServiceUnavailableException", nil},
	} {
		p.Set(tc.mode)
		_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "k"}},
		})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != tc.code {
			t.Errorf("%s: error %v, want the API error %s", tc.mode, err, tc.code)
			continue
		}
		if tc.is != nil && !tc.is(err) {
			t.Errorf("%s: error %T %v is not the SDK's type for it", tc.mode, err, err)
		}
	}
}
