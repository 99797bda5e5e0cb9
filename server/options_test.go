package server

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// A limits list is parsed once and its option reused; lists are told
// apart however their strings split, and a list that does not parse is
// refused every time without being remembered.
func TestLimitOptions(t *testing.T) {
	var c limitOptions
	a, err := c.option([]string{"rpm:5/min", "tpm:100/min"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.option([]string{"rpm:5/min", "tpm:100/min"})
	if reflect.ValueOf(a).Pointer() != reflect.ValueOf(again).Pointer() {
		t.Error("the same list made a second option")
	}
	if string(limitsKey(nil, []string{"ab", "c"})) == string(limitsKey(nil, []string{"a", "bc"})) {
		t.Error("two lists share a key")
	}
	for range 2 {
		if _, err := c.option([]string{"rpm:lots"}); err == nil {
			t.Error("a bad limit was accepted")
		}
	}
	if _, err := c.option(make([]string, api.MaxLimits+1)); err == nil {
		t.Error("too many limits were accepted")
	}
	if len(c.byID) != 1 {
		t.Errorf("%d lists remembered, want 1", len(c.byID))
	}
	for i := range maxLimitOptions + 1 {
		if _, err := c.option([]string{fmt.Sprintf("rpm:%d/min", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.byID); n > maxLimitOptions {
		t.Errorf("%d lists remembered, more than %d", n, maxLimitOptions)
	}
}

// Requests with different limits lists, at once, each get their own.
func TestLimitOptionsPerRequest(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			limit := fmt.Sprintf("rpm:%d/min", i+1)
			body := map[string]any{"entity": fmt.Sprint("k", i), "resource": "api", "consume": map[string]int64{"rpm": 1},
				"limits": []string{limit}, "commit": true}
			for range 3 {
				var acq api.AcquireResponse
				status, _ := e.do("POST", "/v1/acquire", body, &acq)
				if status != http.StatusOK && status != http.StatusTooManyRequests {
					t.Errorf("status %d", status)
					return
				}
				if status == http.StatusOK && acq.Limits[0].Capacity != int64(i+1) {
					t.Errorf("limits %s answered with %+v", limit, acq.Limits)
				}
			}
		})
	}
	wg.Wait()
}
