package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/abandon"
	"github.com/tollgate-rl/tollgate/internal/waitq"
	"github.com/tollgate-rl/tollgate/model"
)

// Defaults of the client options.
const (
	// DefaultTimeout bounds each call, including reading the answer.
	DefaultTimeout = 10 * time.Second
	// DefaultUserAgent is sent unless WithUserAgent says otherwise.
	DefaultUserAgent = "tollgate-go-client/1"
	// MaxResponseBytes bounds the body of any answer the client reads.
	MaxResponseBytes = 1 << 20
)

// PrincipalHeader carries the principal recorded in audit events when the
// server has no API keys.
const PrincipalHeader = api.PrincipalHeader

// Client calls one Tollgate server. It is safe for concurrent use. Create it
// with New.
type Client struct {
	base    *url.URL
	hc      *http.Client
	header  http.Header // sent with every request
	timeout time.Duration
	clock   clock.Clock
	// waiting serves the callers of Wait in deadline order, one line per
	// entity and resource (as the library's Wait does).
	waiting *waitq.Queue[*Lease]
	// keys is false under WithoutIdempotencyKeys.
	keys bool
	// abandoning rolls back acquires of unknown outcome (abandon.go).
	abandoning *abandon.Looks
}

// settings collects the options before New checks them.
type settings struct {
	apiKey    string
	namespace string
	principal string
	userAgent string
	hc        *http.Client
	timeout   time.Duration
	clock     clock.Clock
	noKeys    bool
	onAbandon func(Abandoned)
}

// Option configures a Client.
type Option func(*settings)

// WithAPIKey sends key as "Authorization: Bearer key" with every request.
func WithAPIKey(key string) Option { return func(s *settings) { s.apiKey = key } }

// WithNamespace makes every call work in namespace ns (sent as
// api.NamespaceHeader). Without it the server uses "default", or the
// namespace of the API key.
func WithNamespace(ns string) Option { return func(s *settings) { s.namespace = ns } }

// WithPrincipal records name as the author of changes in audit events when
// the server has no API keys (sent as PrincipalHeader).
func WithPrincipal(name string) Option { return func(s *settings) { s.principal = name } }

// WithUserAgent sets the User-Agent header (default DefaultUserAgent).
func WithUserAgent(ua string) Option { return func(s *settings) { s.userAgent = ua } }

// WithHTTPClient sends requests through hc instead of the client's own,
// e.g. for TLS settings or tracing. hc's Timeout, if any, applies as well
// as WithTimeout's.
func WithHTTPClient(hc *http.Client) Option { return func(s *settings) { s.hc = hc } }

// WithTimeout bounds each call (default DefaultTimeout); zero or less means
// only the caller's context bounds it.
func WithTimeout(d time.Duration) Option { return func(s *settings) { s.timeout = d } }

// WithClock replaces the wall clock that Wait sleeps on, for tests
// (see clock.Fake).
func WithClock(c clock.Clock) Option { return func(s *settings) { s.clock = c } }

// WithoutIdempotencyKeys stops the client sending an idempotency key with
// each acquire it makes up itself (one WithIdempotencyKey gives is still
// sent). Without a key a retried acquire may be granted twice, so the
// client then retries none; on DynamoDB, an acquire with commit and a key
// costs a transaction (docs/dynamodb.md), which a caller that can afford
// the rare double debit may save.
func WithoutIdempotencyKeys() Option { return func(s *settings) { s.noKeys = true } }

// New returns a client of the server at baseURL, e.g.
// "http://localhost:8080" (a path, if any, prefixes every endpoint).
// Bad options are a *model.ValidationError.
func New(baseURL string, opts ...Option) (*Client, error) {
	s := settings{userAgent: DefaultUserAgent, timeout: DefaultTimeout, clock: clock.Real{}}
	for _, o := range opts {
		o(&s)
	}
	base, err := parseBase(baseURL)
	if err != nil {
		return nil, err
	}
	if s.namespace != "" {
		if err := model.ValidateNamespace(s.namespace); err != nil {
			return nil, err
		}
	}
	if s.hc == nil {
		s.hc = &http.Client{Transport: newTransport()}
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	c := &Client{base: base, hc: s.hc, header: s.headers(), timeout: s.timeout, clock: s.clock, keys: !s.noKeys,
		abandoning: abandon.New(s.clock, s.onAbandon)}
	// A grant whose waiting caller left meanwhile is given back.
	c.waiting = waitq.New(c.clock, func(le *Lease) { _ = le.Rollback(context.Background()) })
	return c, nil
}

// parseBase checks an absolute http or https URL without query or fragment.
func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, model.Invalid("base_url", raw, "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, model.Invalid("base_url", raw, "want an http:// or https:// URL")
	case u.Host == "":
		return nil, model.Invalid("base_url", raw, "no host")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, model.Invalid("base_url", raw, "no query or fragment allowed")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}

// newTransport is http.DefaultTransport (proxy from the environment, dial
// and TLS timeouts, HTTP/2) with more idle connections kept per host, as a
// client talks to one server a lot.
func newTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return t
}

func (s settings) headers() http.Header {
	h := http.Header{}
	h.Set("Accept", "application/json")
	h.Set("User-Agent", s.userAgent)
	if s.apiKey != "" {
		h.Set("Authorization", "Bearer "+s.apiKey)
	}
	if s.namespace != "" {
		h.Set(api.NamespaceHeader, s.namespace)
	}
	if s.principal != "" {
		h.Set(PrincipalHeader, s.principal)
	}
	return h
}

// request is one call to the server.
type request struct {
	method string
	path   string // below the base URL, with segments already escaped
	query  url.Values
	body   any // encoded as JSON unless nil
	// status and header, unless nil, receive the status and the header of
	// the answer.
	status *int
	header *http.Header
	// principal, unless empty, replaces the client's PrincipalHeader for
	// this call (a call's model.WithPrincipal).
	principal string
	// idempotencyKey, unless empty, is sent as api.IdempotencyKeyHeader.
	idempotencyKey string
	// condition and conditionValue, unless empty, are the If-Match or
	// If-None-Match header of a change conditional on a version
	// (model.IfVersion, model.IfAbsent; api.PreconditionHeaders).
	condition, conditionValue string
	// retry says the call may be sent again after a transport error (the
	// answer was lost, or the connection failed): an acquire with an
	// idempotency key, a lease's commit, rollback or extend, a read.
	retry bool
}

// changing returns req as the change it is, with the call's write
// options: model.WithPrincipal's principal replaces the client's for this
// call. An event trigger (model.WithTrigger) is sent by Release alone;
// elsewhere it is a *model.ValidationError, as a principal or a trigger
// out of bounds is.
func changing(req request, opts []model.WriteOption) (request, error) {
	o := model.WriteSettingsOf(opts...)
	if err := o.Validate(); err != nil {
		return req, err
	}
	if !o.Trigger.IsZero() {
		return req, model.Invalid("trigger", o.Trigger.Rule, "the HTTP API records the event a change was made on for releases only")
	}
	req.principal = o.Principal
	req.condition, req.conditionValue = api.PreconditionHeaders(opts...)
	return req, nil
}

// op names the call in errors.
func (r request) op() string { return r.method + " " + r.path }

// do sends req and decodes a successful answer into out (unless nil).
//
// A call that may be repeated (request.retry) is sent again, up to
// maxAttempts times in all, after a transport error, while ctx allows:
// the server may have acted on it, and the retry is what makes that
// harmless (an idempotency key, an ending the server remembers).
func (c *Client) do(ctx context.Context, req request, out any) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	for attempt := 1; ; attempt++ {
		lost, err := c.send(ctx, req, out)
		if !lost || !(req.retry || req.method == http.MethodGet) || attempt == maxAttempts || ctx.Err() != nil {
			return err
		}
		if err := clock.Sleep(ctx, c.clock, retryBackoff(attempt)); err != nil {
			return unreachable(req.op(), err)
		}
	}
}

// maxAttempts bounds the sends of a call that may be repeated.
const maxAttempts = 3

// retryBackoff is the pause before attempt+1: 50 ms, then 200 ms.
func retryBackoff(attempt int) time.Duration { return 50 * time.Millisecond << (2 * (attempt - 1)) }

// send sends req once and decodes the answer into out. lost is set when
// no answer came back whole (the error is then an unreachable one): only
// then may the call be repeated.
func (c *Client) send(ctx context.Context, req request, out any) (lost bool, err error) {
	hreq, err := c.newRequest(ctx, req)
	if err != nil {
		return false, err
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return true, unreachable(req.op(), err)
	}
	defer closeBody(resp.Body)
	if req.status != nil {
		*req.status = resp.StatusCode
	}
	if req.header != nil {
		*req.header = resp.Header
	}
	body, err := readBody(resp.Body)
	if err != nil {
		return true, unreachable(req.op(), err) // the answer broke off
	}
	return false, decodeResponse(resp.StatusCode, resp.Header, body, out)
}

func (c *Client) newRequest(ctx context.Context, req request) (*http.Request, error) {
	target := c.base.String() + req.path
	if q := req.query.Encode(); q != "" {
		target += "?" + q
	}
	var body io.Reader
	if req.body != nil {
		data, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("tollgate client: encoding %s: %w", req.op(), err)
		}
		body = bytes.NewReader(data)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("tollgate client: %s: %w", req.op(), err)
	}
	hreq.Header = c.header.Clone()
	if req.principal != "" {
		hreq.Header.Set(PrincipalHeader, req.principal)
	}
	if req.idempotencyKey != "" {
		hreq.Header.Set(api.IdempotencyKeyHeader, req.idempotencyKey)
	}
	if req.condition != "" {
		hreq.Header.Set(req.condition, req.conditionValue)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	return hreq, nil
}

// readBody reads at most MaxResponseBytes; a longer answer is an error.
func readBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("%w: answer larger than %d bytes", ErrBadResponse, MaxResponseBytes)
	}
	return data, nil
}

// closeBody drains a little of what is left, so the connection can be
// reused, and closes the body.
func closeBody(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 4<<10))
	_ = b.Close()
}

// seg escapes one path segment (resources may contain '/').
func seg(s string) string { return url.PathEscape(s) }

// The client is both planes of a server: code written against
// model.Acquirer or model.Administrator runs on it as on the library.
var (
	_ model.Acquirer[*Lease] = (*Client)(nil)
	_ model.Administrator    = (*Client)(nil)
)
