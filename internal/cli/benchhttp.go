package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// httpBench holds what the HTTP routes of tollgate bench share: one
// keep-alive client, and per client the requests of each route built once
// and sent again (as net/http allows once the previous response's body is
// closed), so that the generator, which shares the machine with the
// server, spends its time on HTTP rather than on building requests (URL
// parsing and header maps were about 6% of its CPU time); and the leases
// the acquire route left open, for the commit route.
type httpBench struct {
	hc                     *http.Client
	base, key, ns          string
	acquireCommit, acquire []*http.Request
	available              []*http.Request
	open                   [][]string // per client, the ids of open leases
}

func newHTTPBench(base, key, ns string, n int) (*httpBench, error) {
	h := &httpBench{
		hc:   &http.Client{Transport: &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, IdleConnTimeout: time.Minute}, Timeout: 10 * time.Second},
		base: base, key: key, ns: ns, open: make([][]string, n),
	}
	for i := range n {
		entity := "bench-" + strconv.Itoa(i)
		for _, commit := range []bool{true, false} {
			body, err := json.Marshal(map[string]any{"entity": entity, "resource": "bench",
				"consume": map[string]int64{"rps": 1}, "limits": []string{benchLimit.String()}, "commit": commit})
			if err != nil {
				return nil, err
			}
			req, err := h.request("POST", "/v1/acquire", body)
			if err != nil {
				return nil, err
			}
			if commit {
				h.acquireCommit = append(h.acquireCommit, req)
			} else {
				h.acquire = append(h.acquire, req)
			}
		}
		q := url.Values{"entity": {entity}, "resource": {"bench"}, "limits": {benchLimit.String()}}
		req, err := h.request("GET", "/v1/available?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		h.available = append(h.available, req)
	}
	return h, nil
}

// request builds a request to the server with its headers. With a body it
// is as http.NewRequest with a bytes.Reader: the length and GetBody (which
// lets the transport resend on a connection that died before the request
// went out) are set.
func (h *httpBench) request(method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Tollgate-Namespace", h.ns)
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	return req, nil
}

// op returns load's op for route: one request by client i, its answer
// read whole and its status checked.
func (h *httpBench) op(route string) func(int) error {
	switch route {
	case routeAcquire:
		return func(i int) error {
			var answer struct {
				LeaseID string `json:"lease_id"`
			}
			if err := h.send(h.acquire[i], &answer); err != nil {
				return err
			}
			h.open[i] = append(h.open[i], answer.LeaseID)
			return nil
		}
	case routeCommit:
		return func(i int) error {
			ids := h.open[i]
			if len(ids) == 0 {
				return errRunOut
			}
			h.open[i] = ids[:len(ids)-1]
			req, err := h.request("POST", "/v1/leases/"+url.PathEscape(ids[len(ids)-1])+"/commit", nil)
			if err != nil {
				return err
			}
			return h.send(req, nil)
		}
	case routeAvailable:
		return func(i int) error { return h.send(h.available[i], nil) }
	}
	return func(i int) error { return h.send(h.acquireCommit[i], nil) }
}

// send sends req (again) and reads its answer whole, into out if not nil.
func (h *httpBench) send(req *http.Request, out any) error {
	if req.GetBody != nil {
		// A new body each time: the transport may close the last one
		// from another goroutine after the response came.
		body, _ := req.GetBody()
		req.Body = body
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// load runs route from n clients for d (the package's load). Against a
// server of its own process (remote), it also reads the server's CPU time
// from its metrics before and after the run, for the server's CPU per
// request; a server whose metrics do not say leaves it 0.
func (h *httpBench) load(route string, n int, d time.Duration, remote bool) benchResult {
	var before time.Duration
	ok := false
	if remote {
		before, ok = h.serverCPU()
	}
	r := load("http", route, n, d, h.op(route))
	if ok {
		if after, ok := h.serverCPU(); ok && r.Requests+r.Errors > 0 {
			r.ServerCPUPerRequest = float64((after - before).Nanoseconds()) / 1000 / float64(r.Requests+r.Errors)
		}
	}
	return r
}

// serverCPU returns the CPU time the server's process has used, as its
// metrics report it (process_cpu_seconds_total, from the process
// collector: in clock ticks, 10 ms on Linux, which a run of a few seconds
// makes small per request), and false where they do not.
func (h *httpBench) serverCPU() (time.Duration, bool) {
	req, err := h.request("GET", "/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, false
	}
	f := families["process_cpu_seconds_total"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter() == nil {
		return 0, false
	}
	return time.Duration(f.GetMetric()[0].GetCounter().GetValue() * float64(time.Second)), true
}
