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
